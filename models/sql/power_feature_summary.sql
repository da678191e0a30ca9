-- power_feature_summary: what each GPU model's rows held, for the fit's bookkeeping.
-- Grain: gpu_model. Input: power_features.
-- Columns: gpu_model, feature_set, f_max_mhz (MHz), has_clock (the clock ratio varies, so the
--   exponent is identifiable), n_rows, n_training (rows the fit may use),
--   n_power_limited_excluded, n_incomplete_excluded (training-period rows left out, by reason).
SELECT
    gpu_model,
    any_value(feature_set) AS feature_set,
    max(f_max_mhz) AS f_max_mhz,
    coalesce(min(clock_ratio) < max(clock_ratio), false) AS has_clock,
    count(*) AS n_rows,
    count(*) FILTER (WHERE NOT is_holdout AND NOT is_power_limited AND is_complete) AS n_training,
    count(*) FILTER (WHERE NOT is_holdout AND is_power_limited) AS n_power_limited_excluded,
    count(*) FILTER (WHERE NOT is_holdout AND NOT is_power_limited AND NOT is_complete) AS n_incomplete_excluded
FROM power_features
GROUP BY gpu_model
ORDER BY gpu_model
