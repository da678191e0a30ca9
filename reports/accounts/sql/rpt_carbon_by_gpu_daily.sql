-- rpt_carbon_by_gpu_daily: rpt_carbon_daily's amounts per day, job, GPU model and site, as the
-- accounts computed them GPU-hour by GPU-hour (what the dashboard splits by model and site).
-- kind: day
-- grain: one row per (day, job_id, gpu_model, site)
-- Written by reports.accounts.carbon.carbon_day in the same transaction as rpt_carbon_daily's day.
-- Summed over gpu_model and site, a (day, job_id)'s amounts are its rpt_carbon_daily rows' sums.
-- With idle_policy "proportional" a job carries its share of the idle amounts on the models and
-- sites of the idle GPUs they came from, so each model's and site's amounts are its own GPU-hours'.
-- columns:
--   day [DATE] UTC day
--   job_id [text] job ('unallocated': what no job held)
--   gpu_model [text] GPU model as fct_gpu_energy_hourly names it (NULL when not reported)
--   site [text] the GPU's site in dim_gpu (NULL for a GPU outside the inventory)
--   energy_kwh [kWh] IT energy, as in rpt_carbon_daily (BMC energy split by GPU share where usable,
--     else GPU board energy)
--   gpu_energy_kwh [kWh] GPU board energy of the same GPU-hours
--   location_gco2e [gCO2e] operational, location-based
--   market_gco2e [gCO2e] operational, market-based (NULL for the whole day when rpt_carbon_daily's is)
--   embodied_gco2e [gCO2e] amortised manufacturing footprint
CREATE TABLE IF NOT EXISTS rpt_carbon_by_gpu_daily (
    day DATE NOT NULL,
    job_id VARCHAR NOT NULL,
    gpu_model VARCHAR,
    site VARCHAR,
    energy_kwh DOUBLE,
    gpu_energy_kwh DOUBLE,
    location_gco2e DOUBLE,
    market_gco2e DOUBLE,
    embodied_gco2e DOUBLE
)
