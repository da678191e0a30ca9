-- rpt_carbon_daily: carbon per day x team x user x job x stage (GHG Protocol scope 2, both
-- methods, plus embodied). Rows for a day are replaced as a whole when the day is re-run.
-- Job "unallocated" / stage "idle" holds what no job held (idle_policy = "unallocated").
-- gpu_hours (GPU-hours), energy_kwh (kWh IT: the server's BMC energy split by GPU share where
-- usable, else GPU board energy; see it_energy_basis), gpu_energy_kwh (kWh, GPU board energy of
-- the same GPU-hours), node_ipmi_energy_kwh (kWh, the part of energy_kwh at the node_ipmi basis),
-- it_energy_basis ('node_ipmi' | 'gpu_only', or 'mixed' when the row's GPU-hours used both),
-- facility_energy_kwh (kWh at the meter = IT x PUE), location_gco2e / market_gco2e (gCO2e,
-- operational), embodied_gco2e (gCO2e, amortised manufacturing), total_gco2e (location +
-- embodied), total_market_gco2e (market + embodied), total_low_gco2e / total_high_gco2e (gCO2e,
-- range of total_gco2e), flops_total (FLOP, NULL where jobs report none).
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
    it_energy_basis VARCHAR
);
-- Databases created before the IT-energy basis existed gain its columns.
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS gpu_energy_kwh DOUBLE;
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS node_ipmi_energy_kwh DOUBLE;
ALTER TABLE rpt_carbon_daily ADD COLUMN IF NOT EXISTS it_energy_basis VARCHAR
