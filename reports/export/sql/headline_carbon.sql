-- headline_carbon: the day's carbon accounts in one row. Parameters: $day (DATE).
-- columns: it_energy_kwh [kWh], facility_energy_kwh [kWh], total_gco2e [gCO2e] location-based
--   operational + embodied, total_market_gco2e [gCO2e]; NULL when the day was not accounted
SELECT sum(energy_kwh) AS it_energy_kwh, sum(facility_energy_kwh) AS facility_energy_kwh,
       sum(total_gco2e) AS total_gco2e, sum(total_market_gco2e) AS total_market_gco2e
FROM rpt_carbon_daily
WHERE day = $day
