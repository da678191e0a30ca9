-- acct_gpu_hours: the metered GPU-hours of one day, as the carbon and cost accounts read them.
-- Grain: one row per (hour_at, gpu_uuid). Parameters: $day (DATE).
-- hour_at TIMESTAMPTZ (UTC start of hour), day DATE, host, gpu_uuid, gpu_model,
-- energy_kwh (kWh, GPU board energy in the hour), avg_power_w (W), coverage_ratio (0..1 of the
-- hour with readings).
WITH hours AS (
    SELECT hour_at, day, host, gpu_uuid, gpu_model, energy_kwh, avg_power_w, coverage_ratio
    FROM fct_gpu_energy_hourly
    WHERE day = $day
)
SELECT * FROM hours ORDER BY gpu_uuid, hour_at
