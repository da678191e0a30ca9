-- power_window_choice: power_feature_choice.sql's columns from the stored daily statistics
-- (fct_power_fit_sums_hourly) instead of the window's samples, plus where stored sums may stand in
-- for samples.
-- Grain: gpu_model, days in ($day - $history_days, $day] with statistics of $source.
-- Parameters: $day DATE, $history_days INTEGER, $holdout_fraction DOUBLE (0..1),
--   $holdout_max_days DOUBLE (held-out time: the last holdout_fraction of the window, at most this many days), $source VARCHAR.
-- Which features: the macro fit_feature_choice.sql, as power_feature_choice.sql chooses, over the
--   counts stored per day (each day's choice, which first_mismatch compares, is the same macro's).
-- Columns: as power_feature_choice.sql; stored_until_epoch_s (s since 1970) is, for a model whose
--   clock varies, the earlier of: the start of the hour holding the held-out boundary, and the first
--   hour whose day chose other features than the window did (the fitted day's own rows, which feed
--   fct_power_residual_hourly, are read whatever this is, flagged is_stored before it); -1e18 for a model without varying clock (its decay term needs each
--   sample's history, so all its samples are read).
WITH stored AS (
    SELECT *
    FROM fct_power_fit_sums_hourly
    WHERE source_relation = $source
      AND day <= $day
      AND day > $day - CAST($history_days AS INTEGER)
),
availability AS (
    SELECT
        gpu_model,
        fit_feature_choice(sum(n_rows), sum(n_sm_active), sum(n_dram_active), sum(n_util_gpu), sum(n_util_mem),
                           sum(n_temp), coalesce(sum(n_rows) FILTER (WHERE sm_clock_mhz IS NOT NULL), 0),
                           sum(n_pcie), min(sm_clock_mhz), max(sm_clock_mhz)) AS chosen,
        max(sm_clock_mhz) AS f_max_mhz,
        min(epoch(first_sampled_at)) AS first_epoch_s,
        max(epoch(last_sampled_at)) AS last_epoch_s
    FROM stored
    GROUP BY gpu_model
),
choice AS (
    SELECT
        gpu_model,
        chosen.*,
        f_max_mhz,
        holdout_from_epoch_s(first_epoch_s, last_epoch_s, $holdout_fraction, $holdout_max_days) AS holdout_from_epoch_s
    FROM availability
),
first_mismatch AS (
    SELECT s.gpu_model, min(epoch(s.hour_at)) AS first_mismatch_epoch_s
    FROM stored AS s
    JOIN choice AS c USING (gpu_model)
    WHERE s.feature_set <> c.feature_set OR s.has_activity <> c.has_activity OR s.has_temp <> c.has_temp
       OR s.has_memory <> c.has_memory OR s.has_pcie <> c.has_pcie
    GROUP BY s.gpu_model
)
SELECT
    c.*,
    CASE WHEN c.clock_varies
         THEN least(floor(c.holdout_from_epoch_s / 3600) * 3600, coalesce(m.first_mismatch_epoch_s, 1e18))
         ELSE -1e18 END AS stored_until_epoch_s
FROM choice AS c
LEFT JOIN first_mismatch AS m USING (gpu_model)
