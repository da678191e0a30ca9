-- Energy per GPU model for a day: kWh, GPUs, average power, share of the fleet. Params: day.
WITH hourly AS (
    SELECT gpu_model, gpu_uuid, energy_kwh, coverage_ratio
    FROM fct_gpu_energy_hourly
    WHERE day = $day::DATE
),
per_model AS (
    SELECT
        gpu_model,
        count(DISTINCT gpu_uuid) AS n_gpus,
        sum(energy_kwh) AS energy_kwh,
        sum(energy_kwh) * 1000 / nullif(sum(coverage_ratio), 0) AS avg_power_w,
        avg(coverage_ratio) AS avg_coverage_ratio
    FROM hourly
    GROUP BY gpu_model
)
SELECT *, energy_kwh / sum(energy_kwh) OVER () AS energy_share
FROM per_model
ORDER BY energy_kwh DESC
