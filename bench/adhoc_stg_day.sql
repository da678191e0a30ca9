-- adhoc_stg_day: a typical ad hoc question over one day of readings, as an analyst types it into
-- `joulehouse sql`: per GPU model and hour, mean and 95th-percentile power, hottest reading, and
-- the share of readings with the GPU busy.
-- parameters: $day [DATE] the day asked about
SELECT
    gpu_model,
    date_trunc('hour', sampled_at) AS hour_at,
    count(*) AS readings,
    avg(power_w) AS avg_power_w,
    quantile_cont(power_w, 0.95) AS p95_power_w,
    max(temp_c) AS max_temp_c,
    avg(CASE WHEN util_gpu_pct > 0 THEN 1.0 ELSE 0.0 END) AS busy_share
FROM stg_gpu_samples
WHERE day = $day::DATE
GROUP BY ALL
ORDER BY gpu_model, hour_at
