-- acct_pue_hours: facility PUE per site and hour for one day.
-- Grain: one row per (hour_at, site). Parameters: $day_start, $day_end (TIMESTAMPTZ, UTC), $max_pue
-- (collectors.settings.MAX_PUE: no facility spends 10x its IT power).
-- hour_at TIMESTAMPTZ (UTC start of hour), site, pue (ratio facility/IT energy, 1..$max_pue),
-- facility_kw [kW] the facility meter's average power over the covered part of the hour,
-- coverage_ratio [0..1] the share of the hour the meter covered.
-- An hour whose PUE is below 1 (the facility meter read less than the GPUs drew: a feed it does
-- not see, a wrong CT ratio) is no PUE: left out, the accounts give it default_pue and count it
-- with the hours without one (and its demand takes IT x PUE, as an unmetered hour's). Taken as it
-- is, it charged less facility energy than IT energy. So is one above $max_pue (an IT meter read
-- in kW: PUE 1300, and 1300x the carbon and cost).
WITH pue AS (
    SELECT hour_at, site, pue,
           facility_energy_kwh / nullif(coverage_ratio, 0) AS facility_kw,
           coverage_ratio
    FROM fct_pue_hourly
    WHERE hour_at >= $day_start AND hour_at < $day_end AND pue BETWEEN 1 AND $max_pue
)
SELECT * FROM pue ORDER BY site, hour_at
