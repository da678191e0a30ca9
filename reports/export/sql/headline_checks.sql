-- headline_checks: data checks of the day's latest check run. Parameters: $day (DATE).
-- columns: checks [count] run; blocking_failed [count] blocking checks that failed; NULL without a run
WITH latest AS (
    SELECT * FROM fct_check_results
    WHERE day = $day AND checked_at = (SELECT max(checked_at) FROM fct_check_results WHERE day = $day)
)
SELECT CASE WHEN count(*) > 0 THEN count(*) END AS checks,
       CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE severity = 'blocking' AND NOT success) END AS blocking_failed
FROM latest
