-- acct_pue_hours: facility PUE per site and hour for one day.
-- Grain: one row per (hour_at, site). Parameters: $day_start, $day_end (TIMESTAMPTZ, UTC).
-- hour_at TIMESTAMPTZ (UTC start of hour), site, pue (ratio facility/IT energy, >= 1).
WITH pue AS (
    SELECT hour_at, site, pue
    FROM fct_pue_hourly
    WHERE hour_at >= $day_start AND hour_at < $day_end AND pue IS NOT NULL
)
SELECT * FROM pue ORDER BY site, hour_at
