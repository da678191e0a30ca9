-- rpt_tco_daily: cost per day, team, user, job and stage, split by component.
-- kind: day
-- grain: one row per (day, team, user, job_id, stage)
-- Written by reports.accounts.tco.tco_day; a day's rows are replaced as a whole when it is re-run.
-- Job "unallocated" / stage "idle" holds what no job held (idle_policy of the carbon settings).
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
--     read; at most 1 / [tco] node_energy_min_coverage_ratio of it). The sum over the row's GPU-hours
--     whose energy was measured, NULL where none was (unmetered_gpu_hours counts the others); so are
--     the amounts that follow the energy
--   facility_energy_kwh [kWh] energy at the meter = IT x PUE
--   energy_cost_usd [USD] facility energy x hourly price (negative prices kept)
--   demand_charge_usd [USD] what the day added to the month's peak-kW charge (rpt_demand_peak_daily),
--     on the peak hour's GPU-hours by their energy (equally where none of it was measured); NULL for
--     GPU-hours of GPUs the inventory places at no site ('unknown' beside known sites: no utility meters it)
--   green_premium_usd [USD] uplift when renewables are scarce (NULL where energy_cost_usd is)
--   density_surcharge_usd [USD] uplift by rack kW
--   capital_usd [USD] straight-line depreciation
--   operations_usd [USD] operations
--   total_cost_usd [USD] sum of the components above
--   static_energy_cost_usd [USD] the same energy at the flat average price of the day's metered hours
--   flops_total [FLOP] work done (NULL where jobs report none)
--   cost_per_gpu_hour_usd [USD/GPU-hour] total_cost_usd / gpu_hours
--   cost_per_tflop_hour_usd [USD per 3.6e15 FLOP] NULL without FLOPs
--   gpu_energy_kwh [kWh] GPU board energy of the same GPU-hours
--   node_ipmi_energy_kwh [kWh] the part of energy_kwh at the node_ipmi basis
--   it_energy_basis [text] 'node_ipmi' | 'gpu_only' | 'mixed'
--   total_cost_low_usd [USD] total with the price-driven components (energy, green premium,
--     density surcharge) moved by -price_uncertainty_pct of their size
--   total_cost_high_usd [USD] the same moved by +price_uncertainty_pct
--   unmetered_gpu_hours [GPU-hours] the part of gpu_hours without measured energy: hours of GPUs in
--     the fleet without a reading (reports/accounts/fleet_hours.py), or whose readings were too few
--     to measure it (fct_gpu_energy_hourly.energy_kwh NULL), charged capital and operations and no energy
--   demand_charge_other_month_usd [USD] the part of demand_charge_usd billed in a month other than the
--     UTC day's (its peak hours' local month in the site's zone, [tco] site_prices else tariff_timezone:
--     the UTC day of a month's turn),
--     so that rpt_tco_monthly bills the row's own hours there; 0 on other days; NULL where
--     demand_charge_usd is, and in rows written before it was kept
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
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS total_cost_high_usd DOUBLE;
-- Every hour of a GPU in the fleet is charged, read or not; the unread ones are counted apart.
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS unmetered_gpu_hours DOUBLE;
-- The part of a row's demand charge billed in the other month of a turn's UTC day (rpt_tco_monthly).
ALTER TABLE rpt_tco_daily ADD COLUMN IF NOT EXISTS demand_charge_other_month_usd DOUBLE
