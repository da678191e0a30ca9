-- rpt_carbon_monthly: rpt_carbon_daily summed per calendar month x team x stage.
-- Grain: one row per (month_start, team, stage). Units as in rpt_carbon_daily; jobs_n counts
-- distinct jobs. Low/high add up (a conservative, fully correlated range).
CREATE OR REPLACE VIEW rpt_carbon_monthly AS
WITH daily AS (
    SELECT date_trunc('month', day)::DATE AS month_start, * FROM rpt_carbon_daily
)
SELECT month_start, team, stage,
       count(DISTINCT job_id) AS jobs_n,
       sum(gpu_hours) AS gpu_hours,
       sum(energy_kwh) AS energy_kwh,
       sum(gpu_energy_kwh) AS gpu_energy_kwh,
       sum(node_ipmi_energy_kwh) AS node_ipmi_energy_kwh,
       sum(facility_energy_kwh) AS facility_energy_kwh,
       sum(location_gco2e) AS location_gco2e,
       sum(market_gco2e) AS market_gco2e,
       sum(embodied_gco2e) AS embodied_gco2e,
       sum(total_gco2e) AS total_gco2e,
       sum(total_market_gco2e) AS total_market_gco2e,
       sum(total_low_gco2e) AS total_low_gco2e,
       sum(total_high_gco2e) AS total_high_gco2e
FROM daily
GROUP BY ALL
