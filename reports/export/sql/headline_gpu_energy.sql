-- headline_gpu_energy: the day's GPU board energy. Parameters: $day (DATE).
-- columns: gpu_energy_kwh [kWh] sum of fct_gpu_energy_hourly (NULL when the day has no GPU-hours)
SELECT sum(energy_kwh) AS gpu_energy_kwh
FROM fct_gpu_energy_hourly
WHERE day = $day
