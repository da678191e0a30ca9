-- later_days_built: the days after $day that this warehouse built already (a backfill, or days run
-- out of order): their fits, recommendations, demand charges and first-day baselines did not see
-- $day; re-run in date order, they would.
-- parameters: $day [DATE]
-- columns: day [DATE]
SELECT day FROM fct_warehouse_build_daily WHERE day > $day::DATE ORDER BY day
