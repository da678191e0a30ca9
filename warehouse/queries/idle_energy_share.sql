-- Share of each GPU model's energy spent idle (util_gpu_pct <= 5) on a day. Params: day.
-- Idle energy of an hour = the hour's energy x the share of that hour's readings that were idle.
WITH readings AS (
    SELECT gpu_uuid, source, date_trunc('hour', sampled_at) AS hour_at, util_gpu_pct <= 5 AS idle
    FROM stg_gpu_samples
    WHERE day = $day::DATE AND util_gpu_pct IS NOT NULL
),
idle_hours AS (
    SELECT gpu_uuid, source, hour_at, avg(idle::INT) AS idle_ratio
    FROM readings
    GROUP BY ALL
),
energy AS (
    SELECT e.gpu_model, e.energy_kwh, e.energy_kwh * i.idle_ratio AS idle_energy_kwh
    FROM fct_gpu_energy_hourly AS e
    JOIN idle_hours AS i USING (gpu_uuid, source, hour_at)
    WHERE e.day = $day::DATE
)
SELECT
    gpu_model,
    sum(energy_kwh) AS energy_kwh,
    sum(idle_energy_kwh) AS idle_energy_kwh,
    sum(idle_energy_kwh) / nullif(sum(energy_kwh), 0) AS idle_energy_share
FROM energy
GROUP BY gpu_model
ORDER BY idle_energy_kwh DESC
