-- headline_cost: the day's cost in one row. Parameters: $day (DATE).
-- columns: total_cost_usd [USD] every component; energy_cost_usd [USD] energy at hourly prices
SELECT sum(total_cost_usd) AS total_cost_usd, sum(energy_cost_usd) AS energy_cost_usd
FROM rpt_tco_daily
WHERE day = $day
