-- fct_pue_hourly_rows: the day's rows of fct_pue_hourly (one per site-hour), only the columns the
-- checks read. Not a warehouse relation (no `kind:`): read by warehouse.checks only.
-- grain: one row per (hour_at, site) of the day
-- parameters: $day [DATE] the day checked
-- columns:
--   it_energy_kwh [kWh] IT energy in the hour
--   pue [ratio] facility energy / IT energy
SELECT it_energy_kwh, pue
FROM fct_pue_hourly
WHERE day = $day::DATE
