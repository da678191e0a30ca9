-- dashboard_market_missing_days: the days of rpt_carbon_daily without a market-based figure (the
-- accounts leave a day's market_gco2e NULL when some energy has neither a contract nor a residual
-- mix). A sum over days would count them as zero, so the dashboard's market-based total is not
-- computed while any is held, as the daily report's card is not for such a day. A row without
-- measured energy (a job on a GPU that was not read) has no market figure to miss, as in
-- rpt_carbon_monthly.
-- Columns: days [count]. No parameters.
SELECT count(DISTINCT day) AS days
FROM rpt_carbon_daily
WHERE market_gco2e IS NULL AND energy_kwh IS NOT NULL
