-- The day's cost by component (rpt_tco_daily summed over its rows): what the total is made of,
-- for the label of the terminal's headline. A component NULL in every row stays NULL (unknown).
-- params: $day [DATE] UTC day
SELECT sum(energy_cost_usd) AS energy_cost_usd,
       sum(demand_charge_usd) AS demand_charge_usd,
       sum(green_premium_usd) AS green_premium_usd,
       sum(density_surcharge_usd) AS density_surcharge_usd,
       sum(capital_usd) AS capital_usd,
       sum(operations_usd) AS operations_usd
FROM rpt_tco_daily
WHERE day = $day
