-- rpt_tco_monthly: rpt_tco_daily summed per calendar month, team and stage.
-- kind: view
-- grain: one row per (month_start, team, stage)
-- Low/high add up (fully correlated price error). demand_charge_usd adds up to rate x the month's
-- peak site kW (each day pays what it added to the month's peak: rpt_demand_peak_daily), exact
-- when the month's days were accounted in date order. The demand charge is the tariff's billing
-- month's (the site's zone: [tco] site_prices, else tariff_timezone): on the UTC day that holds a
-- local month's turn, the part of a row's charge its own peak hours added to the other month
-- (rpt_tco_daily.demand_charge_other_month_usd) is counted there, with the totals (in the UTC
-- month, New York's March peak of 31 March 03:00 UTC had been billed in April). Rows written
-- before that column was kept move the day's share of the other month's bill: right for the
-- month, not for a team (a team that drew only after the turn
-- paid part of the month before). Every other amount is its UTC day's month's.
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
other_month AS (
    -- a turn's UTC day holds one billing month besides its own (no UTC offset spans two turns)
    SELECT day, billing_month, share FROM demand_months
    WHERE billing_month <> date_trunc('month', day)::DATE AND share > 0
),
split AS (
    SELECT d.*, o.billing_month AS other_billing_month,
           CASE WHEN o.billing_month IS NULL THEN 0.0
                ELSE coalesce(d.demand_charge_other_month_usd, d.demand_charge_usd * o.share) END AS moved_usd
    FROM daily AS d
    LEFT JOIN other_month AS o ON o.day = d.day
),
months AS (
    SELECT month_start, team, stage, job_id, gpu_hours, unmetered_gpu_hours, energy_kwh,
           gpu_energy_kwh, node_ipmi_energy_kwh, facility_energy_kwh, energy_cost_usd,
           demand_charge_usd - coalesce(moved_usd, 0) AS demand_charge_usd, green_premium_usd,
           density_surcharge_usd, capital_usd, operations_usd,
           total_cost_usd - coalesce(moved_usd, 0) AS total_cost_usd,
           total_cost_low_usd - coalesce(moved_usd, 0) AS total_cost_low_usd,
           total_cost_high_usd - coalesce(moved_usd, 0) AS total_cost_high_usd,
           static_energy_cost_usd
    FROM split
    UNION ALL
    -- the demand charge billed in another month: that month's, with no job, hours or energy of its own
    SELECT other_billing_month, team, stage, NULL, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, moved_usd, 0.0, 0.0,
           0.0, 0.0, moved_usd, moved_usd, moved_usd, 0.0
    FROM split
    WHERE moved_usd <> 0
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
