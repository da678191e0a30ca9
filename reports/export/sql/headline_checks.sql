-- headline_checks: the day's data checks, each checker's latest run: the blocking gate and Great
-- Expectations' warnings run apart and at different times, so "the latest run" is per severity
-- (one max(checked_at) over the day kept only GX's warnings and hid every blocking failure).
-- Parameters: $day (DATE).
-- columns: checks [count] run; blocking_failed, warning_failed [count] checks of that severity that
--   failed; NULL without a run
WITH latest_runs AS (
    SELECT severity, max(checked_at) AS checked_at
    FROM fct_check_results
    WHERE day = $day
    GROUP BY severity
),
latest AS (
    SELECT r.*
    FROM fct_check_results AS r
    JOIN latest_runs AS l ON r.severity = l.severity AND r.checked_at = l.checked_at
    WHERE r.day = $day
)
SELECT CASE WHEN count(*) > 0 THEN count(*) END AS checks,
       CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE severity = 'blocking' AND NOT success) END AS blocking_failed,
       CASE WHEN count(*) > 0 THEN count(*) FILTER (WHERE severity <> 'blocking' AND NOT success) END AS warning_failed
FROM latest
