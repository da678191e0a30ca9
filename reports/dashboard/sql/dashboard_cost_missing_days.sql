-- dashboard_cost_missing_days: the days of rpt_carbon_daily that have no cost accounts
-- (rpt_tco_daily holds no row of them: the cost step did not run, or failed). A sum over days
-- would count them as zero, so the dashboard's total cost is not computed while any is held, and
-- the periods that hold one show no cost (dashboard_carbon_cost).
-- Columns: days [count]. No parameters.
SELECT count(DISTINCT day) AS days
FROM rpt_carbon_daily
WHERE day NOT IN (SELECT day FROM rpt_tco_daily)
