-- recommend_gpu_profile: what each GPU did on one day, for choosing its power limit.
-- Grain: gpu_uuid, rows of `reco_input_samples` (temp view over stg_gpu_samples) with day = $day.
-- Columns: host, gpu_uuid, gpu_model, n_samples, busy_ratio (0..1, share of samples with activity
--   above 5%), busy_hours (h: busy_ratio x the hours the day's samples cover),
--   activity_ratio, activity_deciles (0..1, list of the mean activity of each tenth of the busy
--   samples, lowest first), locked_share_deciles (0..1, per tenth: share of its samples whose SM
--   clocks an application lock held, clock event reason bit 0x2), locked_clock_mhz_deciles (MHz, per
--   tenth: mean SM clock of those locked samples; NULL when none), dram_ratio, util_mem_ratio (0..1, means over busy samples), pcie_gbps (GB/s, busy
--   mean), temp_c (C, busy mean), busy_power_w (W, busy mean), p95_power_w (W), max_power_limit_w (W).
WITH day_rows AS (
    SELECT *, coalesce(CAST(sm_active_ratio AS DOUBLE), util_gpu_pct / 100.0) AS activity
    FROM reco_input_samples
    WHERE day = $day AND power_w IS NOT NULL
),
busy_bins AS (
    SELECT gpu_uuid, activity, sm_clock_mhz,
           coalesce((clock_event_reasons & 2) <> 0, false) AND sm_clock_mhz IS NOT NULL AS clock_locked,
           ntile(10) OVER (PARTITION BY gpu_uuid ORDER BY activity, sampled_at) AS tenth
    FROM day_rows WHERE activity > 0.05
),
per_tenth AS (
    SELECT gpu_uuid, tenth, avg(activity) AS activity,
           avg(CASE WHEN clock_locked THEN 1.0 ELSE 0.0 END) AS locked_share,
           avg(sm_clock_mhz) FILTER (WHERE clock_locked) AS locked_clock_mhz
    FROM busy_bins GROUP BY gpu_uuid, tenth
),
tenths AS (
    SELECT gpu_uuid, list(activity ORDER BY tenth) AS activity_deciles,
           list(locked_share ORDER BY tenth) AS locked_share_deciles,
           list(locked_clock_mhz ORDER BY tenth) AS locked_clock_mhz_deciles
    FROM per_tenth GROUP BY gpu_uuid HAVING count(*) = 10
),
span AS (
    SELECT gpu_uuid, (epoch(max(sampled_at)) - epoch(min(sampled_at))) / 3600.0 AS covered_hours
    FROM day_rows GROUP BY gpu_uuid
)
SELECT
    d.host, d.gpu_uuid, any_value(d.gpu_model) AS gpu_model,
    count(*) AS n_samples,
    avg(CASE WHEN d.activity > 0.05 THEN 1.0 ELSE 0.0 END) AS busy_ratio,
    avg(CASE WHEN d.activity > 0.05 THEN 1.0 ELSE 0.0 END) * any_value(s.covered_hours) AS busy_hours,
    avg(d.activity) FILTER (WHERE d.activity > 0.05) AS activity_ratio,
    any_value(t.activity_deciles) AS activity_deciles,
    any_value(t.locked_share_deciles) AS locked_share_deciles,
    any_value(t.locked_clock_mhz_deciles) AS locked_clock_mhz_deciles,
    avg(d.sm_active_ratio) FILTER (WHERE d.activity > 0.05) AS sm_active_ratio,
    avg(d.util_gpu_pct / 100.0) FILTER (WHERE d.activity > 0.05) AS util_gpu_ratio,
    avg(d.dram_active_ratio) FILTER (WHERE d.activity > 0.05) AS dram_ratio,
    avg(d.util_mem_pct / 100.0) FILTER (WHERE d.activity > 0.05) AS util_mem_ratio,
    avg((d.pcie_tx_bytes_per_s + coalesce(d.pcie_rx_bytes_per_s, 0)) / 1e9) FILTER (WHERE d.activity > 0.05) AS pcie_gbps,
    avg(d.temp_c) FILTER (WHERE d.activity > 0.05) AS temp_c,
    avg(d.power_w) FILTER (WHERE d.activity > 0.05) AS busy_power_w,
    quantile_cont(d.power_w, 0.95) AS p95_power_w,
    max(d.power_limit_w) AS max_power_limit_w
FROM day_rows AS d
JOIN span AS s USING (gpu_uuid)
LEFT JOIN tenths AS t USING (gpu_uuid)
GROUP BY d.host, d.gpu_uuid
ORDER BY d.host, d.gpu_uuid
