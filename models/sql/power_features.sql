-- power_features: the power model's inputs, one row per GPU sample in the fitting window.
-- Grain: gpu_uuid x sampled_at, days in (day - history_days, day] of `power_input_samples`
-- (a temporary view over stg_gpu_samples that models.power creates).
-- Reads power_feature_rows (power_feature_rows.sql: one row's features), adding the decay term.
-- Spark runs this file as warehouse/spark_dialect.py renders it (getvariable('x') becomes Spark's :x).
-- A temporary VIEW, not a table: computing a row's features costs about a tenth of writing it
-- into a table (measured at 5.5 M rows: 0.4 s against 3.3 s of CPU), so each of the few readers
-- recomputes them. Views take no bound parameters, so models.power sets them as variables.
-- Only samples at or after each model's stored_until_epoch_s (power_feature_choice, a temp table
-- built by models.power from power_window_choice.sql or power_feature_choice.sql), and the fitted
-- day's samples (flagged is_stored where they are before it).
-- Variables (getvariable): power_features_day DATE, power_features_history_days INTEGER,
--   power_features_rows_from_day DATE (no model reads earlier), power_features_max_interval_s
--   DOUBLE (longest gap one sample is allowed to stand for).
-- Columns:
--   gpu_model, feature_set ('dcgm' | 'nvml'), host, gpu_uuid, source, sampled_at (UTC), day (DATE)
--   power_w (W, measured), power_limit_w (W), temp_c (C, as read; NULL where missing)
--   temp_delta_c (C above 25 C; 0 where the model has no temperature readings at all)
--   activity_ratio (0..1: sm_active_ratio for dcgm, util_gpu_pct/100 for nvml; 0 where absent)
--   clock_ratio (0..1: sm_clock_mhz / f_max_mhz; 1 where the model has no clock readings)
--   memory_ratio (0..1: dram_active_ratio for dcgm, util_mem_pct/100 for nvml; 0 where absent)
--   pcie_gbps (GB/s, tx + rx; 0 where the model has no PCIe readings; NULL where one direction is
--     missing: the row is incomplete, not a reading of 0)
--   f_max_mhz (MHz, highest SM clock seen for the model in the window)
--   interval_s (s, time this sample stands for: the input's gap to its stream's next reading, capped;
--     no sort here: stg_gpu_samples carries it from the build, models.power adds it to other inputs)
--   is_power_limited (SW power cap bit 0x4 set, or power within 1% of the limit)
--   is_holdout (in the last $holdout_fraction of the model's time range)
--   is_stored (before the model's stored_until_epoch_s: a row of the fitted day whose training sums
--     are in fct_power_fit_sums_hourly already; only the residuals read it)
--   is_complete (every feature the model uses is present in this row)
--   prior_busy_activity_ratio (0..1: activity_ratio of this GPU's last earlier sample with activity > 0;
--     0 where none), since_busy_s (s since that sample; NULL where none): the fit's decay term uses
--     them where the model has no clock readings (power stays up a moment after work stops); NULL
--     (no decay) for models with clock readings
WITH with_prior_busy AS (
    -- Only models without clock readings use the decay term: the window is not paid for the others.
    SELECT
        f.*,
        last_value(CASE WHEN f.activity_ratio > 0 THEN f.sampled_at END IGNORE NULLS) OVER prior AS prior_busy_at,
        last_value(CASE WHEN f.activity_ratio > 0 THEN f.activity_ratio END IGNORE NULLS) OVER prior AS prior_busy_ratio
    FROM power_feature_rows AS f
    WHERE NOT f.model_has_clock
    WINDOW prior AS (PARTITION BY f.gpu_uuid ORDER BY f.sampled_at ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
    -- by position, the columns in one order (Spark SQL has no UNION BY NAME)
    UNION ALL
    SELECT f.*, NULL::TIMESTAMPTZ AS prior_busy_at, NULL::DOUBLE AS prior_busy_ratio
    FROM power_feature_rows AS f
    WHERE f.model_has_clock
)
SELECT
    gpu_model, feature_set, host, gpu_uuid, source, sampled_at, day, power_w, power_limit_w, temp_c, temp_delta_c,
    activity_ratio, clock_ratio, memory_ratio, pcie_gbps, f_max_mhz,
    -- the input's interval_s (stg_gpu_samples carries it from the build's one sort), capped
    least(coalesce(interval_s, 0.0), getvariable('power_features_max_interval_s')) AS interval_s,
    is_power_limited, is_holdout, is_stored,
    coalesce(prior_busy_ratio, 0.0) AS prior_busy_activity_ratio,
    epoch(sampled_at) - epoch(prior_busy_at) AS since_busy_s,
    -- NULL, NaN or infinite where any term is (a NaN temperature had zeroed three coefficients)
    coalesce(isfinite(temp_delta_c + activity_ratio + clock_ratio + memory_ratio + pcie_gbps + power_w), false)
        AS is_complete
FROM with_prior_busy
