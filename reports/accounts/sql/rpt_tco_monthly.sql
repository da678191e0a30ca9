-- rpt_tco_monthly: rpt_tco_daily summed per calendar month, team and stage.
-- kind: view
-- grain: one row per (month_start, team, stage)
-- Low/high add up (fully correlated price error). demand_charge_usd adds up to rate x the month's
-- peak site kW (each day pays what it added to the month's peak: rpt_demand_peak_daily), exact
-- when the month's days were accounted in date order. The demand charge is the tariff's billing
-- month's ([tco] tariff_timezone): on the UTC day that holds a local month's turn, the part billed
-- in the other month (rpt_demand_peak_daily.billing_month) is counted there, with the totals (in
-- the UTC month, New York's March peak of 31 March 03:00 UTC had been billed in April). Every
-- other amount is its UTC day's month's.
-- columns:
--   month_start [DATE] first day of the UTC month (of the billing month, for the demand charge)
--   team [text] team ('unallocated' for the idle line)
--   stage [text] stage ('idle' for the idle line)
--   jobs_n [count] distinct jobs
--   gpu_hours [GPU-hours] GPU time
--   unmetered_gpu_hours [GPU-hours] the part of gpu_hours without measured energy (charged
--     capital and operations and no energy; as in rpt_tco_daily)
--   energy_kwh [kWh] IT energy (basis as in rpt_tco_daily)
--   gpu_energy_kwh [kWh] GPU board energy
--   node_ipmi_energy_kwh [kWh] the part of energy_kwh at the node_ipmi basis
--   facility_energy_kwh [kWh] energy at the meter
--   energy_cost_usd [USD] energy at hourly prices
--   demand_charge_usd [USD] the month's peak-kW charge (rate x the month's peak site kW)
--   green_premium_usd [USD] uplift when renewables are scarce
--   density_surcharge_usd [USD] uplift by rack kW
--   capital_usd [USD] straight-line depreciation
--   operations_usd [USD] operations
--   total_cost_usd [USD] sum of the components
--   total_cost_low_usd [USD] low end (price-driven components moved down)
--   total_cost_high_usd [USD] high end (price-driven components moved up)
--   static_energy_cost_usd [USD] the same energy at the flat average price of each day's metered hours
--   cost_per_gpu_hour_usd [USD/GPU-hour] total_cost_usd / gpu_hours
CREATE OR REPLACE VIEW rpt_tco_monthly AS
WITH daily AS (
    SELECT date_trunc('month', day)::DATE AS month_start, * FROM rpt_tco_daily
),
demand_months AS (
    -- each day's share of its demand charge per billing month (rows of an older table: their UTC month)
    SELECT day, coalesce(billing_month, date_trunc('month', day)::DATE) AS billing_month,
           sum(demand_charge_usd) / nullif(sum(sum(demand_charge_usd)) OVER (PARTITION BY day), 0) AS share
    FROM rpt_demand_peak_daily
    GROUP BY day, coalesce(billing_month, date_trunc('month', day)::DATE)
),
elsewhere AS (
    -- the billing months other than a row's UTC month, and the share of its demand charge each holds
    SELECT d.day, d.job_id, d.team, d.stage, d.demand_charge_usd, m.billing_month, m.share
    FROM daily AS d
    JOIN demand_months AS m ON m.day = d.day AND m.billing_month <> d.month_start AND m.share > 0
),
moved AS (
    SELECT day, job_id, team, stage, sum(demand_charge_usd * share) AS moved_usd FROM elsewhere GROUP BY ALL
),
months AS (
    SELECT d.month_start, d.team, d.stage, d.job_id, d.gpu_hours, d.unmetered_gpu_hours, d.energy_kwh,
           d.gpu_energy_kwh, d.node_ipmi_energy_kwh, d.facility_energy_kwh, d.energy_cost_usd,
           d.demand_charge_usd - coalesce(v.moved_usd, 0) AS demand_charge_usd, d.green_premium_usd,
           d.density_surcharge_usd, d.capital_usd, d.operations_usd,
           d.total_cost_usd - coalesce(v.moved_usd, 0) AS total_cost_usd,
           d.total_cost_low_usd - coalesce(v.moved_usd, 0) AS total_cost_low_usd,
           d.total_cost_high_usd - coalesce(v.moved_usd, 0) AS total_cost_high_usd,
           d.static_energy_cost_usd
    FROM daily AS d
    LEFT JOIN moved AS v
      ON v.day = d.day AND v.job_id IS NOT DISTINCT FROM d.job_id AND v.team IS NOT DISTINCT FROM d.team
     AND v.stage IS NOT DISTINCT FROM d.stage
    UNION ALL
    -- the demand charge billed in another month: that month's, with no job, hours or energy of its own
    SELECT billing_month, team, stage, NULL, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, demand_charge_usd * share, 0.0, 0.0,
           0.0, 0.0, demand_charge_usd * share, demand_charge_usd * share, demand_charge_usd * share, 0.0
    FROM elsewhere
)
SELECT month_start, team, stage,
       count(DISTINCT job_id) AS jobs_n,
       sum(gpu_hours) AS gpu_hours,
       sum(unmetered_gpu_hours) AS unmetered_gpu_hours,
       sum(energy_kwh) AS energy_kwh,
       sum(gpu_energy_kwh) AS gpu_energy_kwh,
       sum(node_ipmi_energy_kwh) AS node_ipmi_energy_kwh,
       sum(facility_energy_kwh) AS facility_energy_kwh,
       sum(energy_cost_usd) AS energy_cost_usd,
       sum(demand_charge_usd) AS demand_charge_usd,
       sum(green_premium_usd) AS green_premium_usd,
       sum(density_surcharge_usd) AS density_surcharge_usd,
       sum(capital_usd) AS capital_usd,
       sum(operations_usd) AS operations_usd,
       sum(total_cost_usd) AS total_cost_usd,
       sum(total_cost_low_usd) AS total_cost_low_usd,
       sum(total_cost_high_usd) AS total_cost_high_usd,
       sum(static_energy_cost_usd) AS static_energy_cost_usd,
       sum(total_cost_usd) / nullif(sum(gpu_hours), 0) AS cost_per_gpu_hour_usd
FROM months
GROUP BY ALL
