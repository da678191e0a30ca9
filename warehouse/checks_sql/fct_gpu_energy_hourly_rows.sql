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
SELECT hour_at, gpu_uuid, energy_kwh, coverage_ratio, energy_source
FROM fct_gpu_energy_hourly
WHERE day = $day::DATE
