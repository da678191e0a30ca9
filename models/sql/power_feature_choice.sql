-- power_feature_choice: per GPU model, which features the fit uses and where its held-out time starts,
-- read from the samples of the window themselves (the reference path; models.power.fit_day uses
-- power_window_choice.sql, the same rules over fct_power_fit_sums_hourly).
-- Grain: gpu_model, days in ($day - $history_days, $day] of `power_input_samples` (one stream of readings
--   per GPU and day, models/sql/gpu_activity_streams.sql: the shares below count that stream's rows).
-- Parameters: $day DATE, $history_days INTEGER, $holdout_fraction DOUBLE (0..1),
--   $holdout_max_days DOUBLE (held-out time: the last holdout_fraction of the window, at most this many days).
-- Columns: gpu_model, feature_set ('dcgm' | 'nvml'), has_activity, has_temp, has_clock (clock read in
--   most rows), has_memory, has_pcie, f_max_mhz (MHz, highest SM clock), holdout_from_epoch_s (s since
--   1970: samples at or after it are held out), clock_varies (the clock ratio varies, so alpha is
--   identifiable), stored_until_epoch_s (s since 1970: training rows before it come from stored
--   statistics; -1e18 here: none do).
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
        count(sm_active_ratio) / count(*) AS sm_active_share,
        count(dram_active_ratio) / count(*) AS dram_active_share,
        count(util_gpu_pct) / count(*) AS util_gpu_share,
        count(util_mem_pct) / count(*) AS util_mem_share,
        count(temp_c) / count(*) AS temp_share,
        count(sm_clock_mhz) / count(*) AS clock_share,
        count(pcie_tx_bytes_per_s + pcie_rx_bytes_per_s) / count(*) AS pcie_share,
        max(sm_clock_mhz) AS f_max_mhz,
        min(sm_clock_mhz) AS f_min_mhz,
        min(epoch(sampled_at)) AS first_epoch_s,
        max(epoch(sampled_at)) AS last_epoch_s
    FROM window_rows
    GROUP BY gpu_model
)
SELECT
    gpu_model,
    CASE WHEN sm_active_share >= 0.5 THEN 'dcgm' ELSE 'nvml' END AS feature_set,
    -- A model with no activity readings at all (a log of power and temperature only) gets a
    -- static-only fit instead of none.
    sm_active_share >= 0.5 OR util_gpu_share >= 0.5 AS has_activity,
    temp_share >= 0.5 AS has_temp,
    clock_share >= 0.5 AND f_max_mhz > 0 AS has_clock,
    CASE WHEN sm_active_share >= 0.5 THEN dram_active_share ELSE util_mem_share END >= 0.5 AS has_memory,
    pcie_share >= 0.5 AS has_pcie,
    f_max_mhz,
    greatest(first_epoch_s + (last_epoch_s - first_epoch_s) * (1 - $holdout_fraction),
             last_epoch_s - $holdout_max_days * 86400) AS holdout_from_epoch_s,
    clock_share >= 0.5 AND f_max_mhz > 0 AND f_min_mhz < f_max_mhz AS clock_varies,
    -1e18 AS stored_until_epoch_s
FROM availability
