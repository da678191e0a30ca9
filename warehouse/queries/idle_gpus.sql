-- GPUs idle (util_gpu_pct <= 5) in at least 80% of their readings on a day, with their energy. Params: day.
WITH readings AS (
    SELECT host, gpu_uuid, gpu_model, util_gpu_pct <= 5 AS idle
    FROM stg_gpu_samples
    WHERE day = $day::DATE AND util_gpu_pct IS NOT NULL
),
per_gpu AS (
    SELECT host, gpu_uuid, max(gpu_model) AS gpu_model, avg(idle::INT) AS idle_ratio, count(*) AS n_samples
    FROM readings
    GROUP BY host, gpu_uuid
),
energy AS (
    SELECT gpu_uuid, sum(energy_kwh) AS energy_kwh
    FROM fct_gpu_energy_hourly
    WHERE day = $day::DATE
    GROUP BY gpu_uuid
)
SELECT p.host, p.gpu_uuid, p.gpu_model, p.idle_ratio, e.energy_kwh, p.n_samples
FROM per_gpu AS p
LEFT JOIN energy AS e USING (gpu_uuid)
WHERE p.idle_ratio >= 0.8
ORDER BY e.energy_kwh DESC NULLS LAST, p.gpu_uuid
