-- rpt_carbon_daily: carbon per day, team, user, job and stage (GHG Protocol scope 2, both
-- methods, plus embodied).
-- kind: day
-- grain: one row per (day, team, user, job_id, stage)
-- Written by reports.accounts.carbon.carbon_day; a day's rows are replaced as a whole when it is re-run.
-- Job "unallocated" / stage "idle" holds what no job held (idle_policy = "unallocated").
-- columns:
--   day [DATE] UTC day
--   team [text] team of the job ('unallocated' for the idle line)
--   user [text] user who ran the job
--   job_id [text] job ('unallocated': what no job held)
--   stage [text] data-preparation | training | inference | evaluation ('idle' for the idle line)
--   gpu_hours [GPU-hours] GPU time attributed to the row
--   energy_kwh [kWh] IT energy: the server's BMC energy split by GPU share where usable, else GPU
--     board energy (see it_energy_basis). The BMC's hour is taken whole: its energy over the covered
--     part / coverage_ratio (so it can exceed fct_node_energy_hourly's, which counts only what was
--     read; at most 1 / [carbon] node_energy_min_coverage_ratio of it). The sum over the row's GPU-hours
--     whose energy was measured, NULL where none was (unmetered_gpu_hours counts the others); so are
--     the amounts that follow the energy
--   facility_energy_kwh [kWh] energy at the meter = IT x PUE
--   location_gco2e [gCO2e] operational, location-based (grid intensity of the region and hour)
--   market_gco2e [gCO2e] operational, market-based: contracts, then the region's residual mix (NULL for
--     the whole day when some energy has neither: see market_basis); no contract covers a GPU the
--     inventory places at no site ('unknown' beside known sites)
--   embodied_gco2e [gCO2e] amortised manufacturing footprint
--   total_gco2e [gCO2e] location + embodied
--   total_market_gco2e [gCO2e] market + embodied
--   total_low_gco2e [gCO2e] low end of the range of total_gco2e
--   total_high_gco2e [gCO2e] high end of the range of total_gco2e
--   flops_total [FLOP] work done (NULL where jobs report none)
--   gpu_energy_kwh [kWh] GPU board energy of the same GPU-hours
--   node_ipmi_energy_kwh [kWh] the part of energy_kwh at the node_ipmi basis
--   it_energy_basis [text] 'node_ipmi' | 'gpu_only', or 'mixed' when the row's GPU-hours used both
--   market_basis [text] the contracts and residual mix (value, source, data year, or "not available")
--     market-based carbon used that day
--   unmetered_gpu_hours [GPU-hours] the part of gpu_hours without measured energy: hours of GPUs in
--     the fleet without a reading (reports/accounts/fleet_hours.py), or whose readings were too few
--     to measure it (fct_gpu_energy_hourly.energy_kwh NULL), charged embodied carbon and no energy
CREATE TABLE IF NOT EXISTS rpt_carbon_daily (
    day DATE NOT NULL,
    team VARCHAR NOT NULL,
    "user" VARCHAR NOT NULL,
    job_id VARCHAR NOT NULL,
    stage VARCHAR NOT NULL,
    gpu_hours DOUBLE,
    energy_kwh DOUBLE,
    facility_energy_kwh DOUBLE,
    location_gco2e DOUBLE,
    market_gco2e DOUBLE,
    embodied_gco2e DOUBLE,
    total_gco2e DOUBLE,
    total_market_gco2e DOUBLE,
    total_low_gco2e DOUBLE,
    total_high_gco2e DOUBLE,
    flops_total DOUBLE,
    gpu_energy_kwh DOUBLE,
    node_ipmi_energy_kwh DOUBLE,
    it_energy_basis VARCHAR,
    market_basis VARCHAR
);
-- Databases created before the IT-energy basis existed gain its columns.
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS gpu_energy_kwh DOUBLE;
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS node_ipmi_energy_kwh DOUBLE;
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS it_energy_basis VARCHAR;
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS market_basis VARCHAR;
-- Every hour of a GPU in the fleet is charged, read or not; the unread ones are counted apart.
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS unmetered_gpu_hours DOUBLE
