-- recommend_gpu_profile: what each GPU did on one day, for choosing its power limit.
-- Grain: gpu_uuid, rows of `reco_input_samples` (temp view over stg_gpu_samples) with day = $day.
-- Columns: host, gpu_uuid, gpu_model, n_samples, busy_ratio (0..1, share of samples with activity
--   above 5%), busy_hours (h: busy_ratio x the hours the day's samples cover),
--   activity_ratio, activity_deciles (0..1, list of the 5th, 15th .. 95th percentiles over busy samples), dram_ratio, util_mem_ratio (0..1, means over busy samples), pcie_gbps (GB/s, busy
--   mean), temp_c (C, busy mean), busy_power_w (W, busy mean), p95_power_w (W), max_power_limit_w (W).
WITH day_rows AS (
    SELECT *, coalesce(CAST(sm_active_ratio AS DOUBLE), util_gpu_pct / 100.0) AS activity
    FROM reco_input_samples
    WHERE day = $day AND power_w IS NOT NULL
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
    quantile_cont(d.activity, [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95])
        FILTER (WHERE d.activity > 0.05) AS activity_deciles,
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
GROUP BY d.host, d.gpu_uuid
ORDER BY d.host, d.gpu_uuid
