-- power_feature_summary: what each GPU model's rows held, for the fit's bookkeeping.
-- Grain: gpu_model. Inputs: power_feature_choice, power_features (samples from each model's
--   stored_until_epoch_s on), power_stored_hours (stored daily counts before it).
-- Columns: gpu_model, feature_set, f_max_mhz (MHz), has_clock (the clock ratio varies, so the
--   exponent is identifiable), n_rows, n_training (rows the fit may use),
--   n_power_limited_excluded, n_incomplete_excluded (training-period rows left out, by reason).
WITH row_counts AS (
    SELECT
        gpu_model,
        count(*) AS n_rows,
        count(*) FILTER (WHERE NOT is_holdout AND NOT is_power_limited AND is_complete) AS n_training,
        count(*) FILTER (WHERE NOT is_holdout AND is_power_limited) AS n_power_limited_excluded,
        count(*) FILTER (WHERE NOT is_holdout AND NOT is_power_limited AND NOT is_complete) AS n_incomplete_excluded
    FROM power_features
    WHERE NOT is_stored
    GROUP BY gpu_model
),
stored_counts AS (
    -- stored hours are training time (before the held-out boundary); rows without a clock reading
    -- are incomplete for a model whose clock varies (the only models that use stored hours)
    SELECT
        gpu_model,
        sum(n_rows) AS n_rows,
        coalesce(sum(n) FILTER (WHERE sm_clock_mhz IS NOT NULL), 0) AS n_training,
        sum(n_power_limited) AS n_power_limited_excluded,
        sum(n_incomplete) + coalesce(sum(n) FILTER (WHERE sm_clock_mhz IS NULL), 0) AS n_incomplete_excluded
    FROM power_stored_hours
    GROUP BY gpu_model
)
SELECT
    c.gpu_model,
    c.feature_set,
    c.f_max_mhz,
    c.clock_varies AS has_clock,
    coalesce(r.n_rows, 0) + coalesce(s.n_rows, 0) AS n_rows,
    coalesce(r.n_training, 0) + coalesce(s.n_training, 0) AS n_training,
    coalesce(r.n_power_limited_excluded, 0) + coalesce(s.n_power_limited_excluded, 0) AS n_power_limited_excluded,
    coalesce(r.n_incomplete_excluded, 0) + coalesce(s.n_incomplete_excluded, 0) AS n_incomplete_excluded
FROM power_feature_choice AS c
LEFT JOIN row_counts AS r USING (gpu_model)
LEFT JOIN stored_counts AS s USING (gpu_model)
ORDER BY c.gpu_model
