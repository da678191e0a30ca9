-- The 20 GPUs that used the most energy on a day (kWh, average power W, coverage). Params: day.
WITH per_gpu AS (
    SELECT
        host, gpu_uuid, gpu_model,
        sum(energy_kwh) AS energy_kwh,
        sum(energy_kwh) * 1000 / nullif(sum(coverage_ratio), 0) AS avg_power_w,
        sum(coverage_ratio) / 24 AS coverage_ratio
    FROM fct_gpu_energy_hourly
    WHERE day = $day::DATE
    GROUP BY ALL
)
SELECT * FROM per_gpu
ORDER BY energy_kwh DESC NULLS LAST, gpu_uuid
LIMIT 20
