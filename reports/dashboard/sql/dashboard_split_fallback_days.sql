-- dashboard_split_fallback_days: the days of rpt_carbon_daily whose carbon or cost the dashboard
-- splits over GPU models and sites by GPU board energy (an approximation), because the accounts'
-- own split (rpt_carbon_by_gpu_daily, rpt_tco_by_gpu_daily) does not hold them: days accounted
-- before those tables were kept. No parameters.
-- Columns: days [count], first_day [DATE], last_day [DATE].
WITH fallback AS (
    SELECT DISTINCT day FROM rpt_carbon_daily
    WHERE day NOT IN (SELECT day FROM rpt_carbon_by_gpu_daily)
       OR day IN (SELECT day FROM rpt_tco_daily) AND day NOT IN (SELECT day FROM rpt_tco_by_gpu_daily)
)
SELECT count(*) AS days, min(day) AS first_day, max(day) AS last_day FROM fallback
