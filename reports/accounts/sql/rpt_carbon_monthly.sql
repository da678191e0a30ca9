-- rpt_carbon_monthly: rpt_carbon_daily summed per calendar month, team and stage.
-- kind: view
-- grain: one row per (month_start, team, stage)
-- Low/high add up (a conservative, fully correlated range). A day without a market-based figure
-- (rpt_carbon_daily's NULL) leaves the month's market_gco2e and total_market_gco2e NULL: summed,
-- it would count as 0 g and the month read as cleaner than it was. A row whose energy was never
-- measured (energy and market_gco2e both NULL) does not: it has no market figure to miss.
-- columns:
--   month_start [DATE] first day of the UTC month
--   team [text] team ('unallocated' for the idle line)
--   stage [text] stage ('idle' for the idle line)
--   jobs_n [count] distinct jobs
--   gpu_hours [GPU-hours] GPU time
--   unmetered_gpu_hours [GPU-hours] the part of gpu_hours without measured energy (charged
--     embodied carbon and no energy; as in rpt_carbon_daily)
--   energy_kwh [kWh] IT energy (basis as in rpt_carbon_daily)
--   gpu_energy_kwh [kWh] GPU board energy
--   node_ipmi_energy_kwh [kWh] the part of energy_kwh at the node_ipmi basis
--   facility_energy_kwh [kWh] energy at the meter
--   location_gco2e [gCO2e] operational, location-based
--   market_gco2e [gCO2e] operational, market-based (NULL when a day of the month has none)
--   embodied_gco2e [gCO2e] amortised manufacturing footprint
--   total_gco2e [gCO2e] location + embodied
--   total_market_gco2e [gCO2e] market + embodied
--   total_low_gco2e [gCO2e] low end of total_gco2e's range
--   total_high_gco2e [gCO2e] high end of total_gco2e's range
CREATE OR REPLACE VIEW rpt_carbon_monthly AS
WITH daily AS (
    SELECT date_trunc('month', day)::DATE AS month_start, * FROM rpt_carbon_daily
)
SELECT month_start, team, stage,
       count(DISTINCT job_id) AS jobs_n,
       sum(gpu_hours) AS gpu_hours,
       sum(unmetered_gpu_hours) AS unmetered_gpu_hours,
       sum(energy_kwh) AS energy_kwh,
       sum(gpu_energy_kwh) AS gpu_energy_kwh,
       sum(node_ipmi_energy_kwh) AS node_ipmi_energy_kwh,
       sum(facility_energy_kwh) AS facility_energy_kwh,
       sum(location_gco2e) AS location_gco2e,
       CASE WHEN count(market_gco2e) = count(facility_energy_kwh) THEN sum(market_gco2e) END AS market_gco2e,
       sum(embodied_gco2e) AS embodied_gco2e,
       sum(total_gco2e) AS total_gco2e,
       CASE WHEN count(total_market_gco2e) = count(*) THEN sum(total_market_gco2e) END AS total_market_gco2e,
       sum(total_low_gco2e) AS total_low_gco2e,
       sum(total_high_gco2e) AS total_high_gco2e
FROM daily
GROUP BY ALL
