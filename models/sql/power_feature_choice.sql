-- power_feature_choice: per GPU model, which features the fit uses and where its held-out time starts,
-- read from the samples of the window themselves (the reference path; models.power.fit_day uses
-- power_window_choice.sql, the same rules over fct_power_fit_sums_hourly).
-- Grain: gpu_model, days in ($day - $history_days, $day] of `power_input_samples` (one stream of readings
--   per GPU and day, models/sql/gpu_activity_streams.sql: the counts below are of that stream's rows).
-- Parameters: $day DATE, $history_days INTEGER, $holdout_fraction DOUBLE (0..1),
--   $holdout_max_days DOUBLE (held-out time: the last holdout_fraction of the window, at most this many days).
-- Which features: the macro fit_feature_choice.sql over the window's rows, the rule each day's stored
--   sums choose by too (fct_power_fit_sums_hourly.sql).
-- Columns: gpu_model, feature_set ('dcgm' | 'nvml'), activity_kind ('sm_active' | 'util_gpu': the
--   measure activity_of_kind.sql reads that set's activity in), has_activity, has_temp, has_clock
--   (clock read in most rows), has_memory, has_pcie, clock_varies (the clock ratio varies, so alpha
--   is identifiable), f_max_mhz (MHz, highest SM clock), holdout_from_epoch_s (s since 1970: samples
--   at or after it are held out), stored_until_epoch_s (s since 1970: training rows before it come
--   from stored statistics; -1e18 here: none do).
WITH window_rows AS (
    SELECT *
    FROM power_input_samples
    WHERE day <= $day
      AND day > $day - CAST($history_days AS INTEGER)
      AND power_w IS NOT NULL
      AND gpu_model IS NOT NULL
),
availability AS (
    SELECT
        gpu_model,
        fit_feature_choice(count(*), count(sm_active_ratio), count(dram_active_ratio), count(util_gpu_pct),
                           count(util_mem_pct), count(temp_c), count(sm_clock_mhz),
                           count(pcie_tx_bytes_per_s + pcie_rx_bytes_per_s), min(sm_clock_mhz), max(sm_clock_mhz))
            AS chosen,
        max(sm_clock_mhz) AS f_max_mhz,
        min(epoch(sampled_at)) AS first_epoch_s,
        max(epoch(sampled_at)) AS last_epoch_s
    FROM window_rows
    GROUP BY gpu_model
)
SELECT
    gpu_model,
    chosen.*,
    f_max_mhz,
    holdout_from_epoch_s(first_epoch_s, last_epoch_s, $holdout_fraction, $holdout_max_days) AS holdout_from_epoch_s,
    -1e18 AS stored_until_epoch_s
FROM availability
