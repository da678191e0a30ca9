-- fct_gpu_energy_hourly_rows: the day's rows of fct_gpu_energy_hourly, only the columns the checks
-- read. Already one row per GPU-hour (GPUs x 24 a day), small enough to validate row by row.
-- Not a warehouse relation (no `kind:`): read by warehouse.checks only.
-- grain: one row per (hour_at, gpu_uuid) of the day
-- parameters: $day [DATE] the day checked
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   gpu_uuid [text] GPU
--   energy_kwh [kWh] energy in the hour
--   coverage_ratio [0..1] share of the hour covered by readings
--   energy_source [text] 'counter' or 'power_integral'
--   hour_in_day [bool] hour_at starts within the day (a row of another day's hour is counted twice)
SELECT hour_at, gpu_uuid, energy_kwh, coverage_ratio, energy_source,
       hour_at >= $day::TIMESTAMPTZ AND hour_at < ($day::DATE + 1)::TIMESTAMPTZ AS hour_in_day
FROM fct_gpu_energy_hourly
WHERE day = $day::DATE
