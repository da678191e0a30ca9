-- rpt_tco_daily: cost per day x team x user x job x stage, split by component (USD).
-- Job "unallocated" / stage "idle" holds what no job held (idle_policy of the carbon settings).
-- gpu_hours (GPU-hours), energy_kwh (kWh IT, basis as in rpt_carbon_daily), gpu_energy_kwh (kWh
-- GPU board), node_ipmi_energy_kwh (kWh of energy_kwh at the node_ipmi basis), it_energy_basis
-- ('node_ipmi' | 'gpu_only' | 'mixed'), facility_energy_kwh (kWh at the meter),
-- energy_cost_usd (facility energy x hourly price; negative prices kept), demand_charge_usd
-- (the day's share of the monthly peak-kW charge), green_premium_usd, density_surcharge_usd,
-- capital_usd (straight-line depreciation), operations_usd, total_cost_usd (sum of those),
-- total_cost_low_usd / total_cost_high_usd (USD, total with the price-driven components
-- (energy, green premium, density surcharge) moved by -/+ price_uncertainty_pct of their size),
-- static_energy_cost_usd (same energy at the day's flat average price), flops_total (FLOP),
-- cost_per_gpu_hour_usd ($/GPU-hour), cost_per_tflop_hour_usd ($ per 3.6e15 FLOP, NULL without FLOPs).
CREATE TABLE IF NOT EXISTS rpt_tco_daily (
    day DATE NOT NULL,
    team VARCHAR NOT NULL,
    "user" VARCHAR NOT NULL,
    job_id VARCHAR NOT NULL,
    stage VARCHAR NOT NULL,
    gpu_hours DOUBLE,
    energy_kwh DOUBLE,
    facility_energy_kwh DOUBLE,
    energy_cost_usd DOUBLE,
    demand_charge_usd DOUBLE,
    green_premium_usd DOUBLE,
    density_surcharge_usd DOUBLE,
    capital_usd DOUBLE,
    operations_usd DOUBLE,
    total_cost_usd DOUBLE,
    static_energy_cost_usd DOUBLE,
    flops_total DOUBLE,
    cost_per_gpu_hour_usd DOUBLE,
    cost_per_tflop_hour_usd DOUBLE,
    gpu_energy_kwh DOUBLE,
    node_ipmi_energy_kwh DOUBLE,
    it_energy_basis VARCHAR,
    total_cost_low_usd DOUBLE,
    total_cost_high_usd DOUBLE
);
-- Databases created before the IT-energy basis and the cost range existed gain their columns.
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS gpu_energy_kwh DOUBLE;
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS node_ipmi_energy_kwh DOUBLE;
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS it_energy_basis VARCHAR;
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS total_cost_low_usd DOUBLE;
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS total_cost_high_usd DOUBLE
