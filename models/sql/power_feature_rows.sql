-- power_feature_rows: each sample's power-model features, without the decay term's history.
-- A temporary view that models.power creates; power_features.sql (the view the fit reads) adds the
-- decay term for models without clock readings. Apart because a CTE that two branches read is
-- materialised by DuckDB (every feature row written once more); a view is read as often as used.
-- Rows: the samples of the fitting window at or after each model's stored_until_epoch_s, and the
-- fitted day's (for its residuals): earlier training rows are summed in fct_power_fit_sums_hourly
-- already (power_features_rows_from_day: the earliest such day, so the scan skips whole days).
-- Variables and columns: as power_features.sql, without prior_busy_activity_ratio and
-- since_busy_s, plus model_has_clock (the model's clock varies: no decay term). Activity and memory
-- are read in the measure of the feature set chosen from the data (power_feature_choice.activity_kind,
-- fit_feature_choice.sql's pairing: 'dcgm' DCGM's SM and DRAM activity, kind 'sm_active'; 'nvml'
-- NVML's utilisations, 'util_gpu') by the macro activity_of_kind.sql, the rule every file that reads
-- activity calls (models.activity creates it; for Spark, warehouse/spark_dialect.py inlines it).
SELECT
    w.gpu_model,
    c.feature_set,
    w.host,
    w.gpu_uuid,
    w.source,
    w.sampled_at,
    w.day,
    CAST(w.interval_s AS DOUBLE) AS interval_s,
    CAST(w.power_w AS DOUBLE) AS power_w,
    CAST(w.power_limit_w AS DOUBLE) AS power_limit_w,
    CAST(w.temp_c AS DOUBLE) AS temp_c,
    CASE WHEN c.has_temp THEN w.temp_c - 25.0 ELSE 0.0 END AS temp_delta_c,
    CASE WHEN c.has_activity THEN activity_of_kind(c.activity_kind, w.sm_active_ratio, w.util_gpu_pct)
         ELSE 0.0 END AS activity_ratio,
    CASE WHEN c.has_clock THEN w.sm_clock_mhz / c.f_max_mhz ELSE 1.0 END AS clock_ratio,
    CASE WHEN c.has_memory THEN activity_of_kind(c.activity_kind, w.dram_active_ratio, w.util_mem_pct)
         ELSE 0.0 END AS memory_ratio,
    CASE WHEN c.has_pcie THEN (w.pcie_tx_bytes_per_s + w.pcie_rx_bytes_per_s) / 1e9
         ELSE 0.0 END AS pcie_gbps,
    CAST(c.f_max_mhz AS DOUBLE) AS f_max_mhz,
    (coalesce(w.clock_event_reasons, 0) & 4) <> 0
        OR (w.power_limit_w IS NOT NULL AND w.power_w >= 0.99 * w.power_limit_w) AS is_power_limited,
    epoch(w.sampled_at) >= c.holdout_from_epoch_s AS is_holdout,
    epoch(w.sampled_at) < c.stored_until_epoch_s AS is_stored,
    c.has_clock AS model_has_clock
FROM power_input_samples AS w
JOIN power_feature_choice AS c USING (gpu_model)
WHERE w.day <= getvariable('power_features_day')
  AND w.day > getvariable('power_features_day') - CAST(getvariable('power_features_history_days') AS INTEGER)
  AND w.day >= getvariable('power_features_rows_from_day')
  AND w.power_w IS NOT NULL
  AND (epoch(w.sampled_at) >= c.stored_until_epoch_s OR w.day = getvariable('power_features_day'))
