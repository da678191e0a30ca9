-- acct_pue_hours: facility PUE per site and hour for one day.
-- Grain: one row per (hour_at, site). Parameters: $day_start, $day_end (TIMESTAMPTZ, UTC).
-- hour_at TIMESTAMPTZ (UTC start of hour), site, pue (ratio facility/IT energy, >= 1),
-- facility_kw [kW] the facility meter's average power over the covered part of the hour,
-- coverage_ratio [0..1] the share of the hour the meter covered.
-- An hour whose PUE is below 1 (the facility meter read less than the GPUs drew: a feed it does
-- not see, a wrong CT ratio) is no PUE: left out, the accounts give it default_pue and count it
-- with the hours without one (and its demand takes IT x PUE, as an unmetered hour's). Taken as it
-- is, it charged less facility energy than IT energy.
WITH pue AS (
    SELECT hour_at, site, pue,
           facility_energy_kwh / nullif(coverage_ratio, 0) AS facility_kw,
           coverage_ratio
    FROM fct_pue_hourly
    WHERE hour_at >= $day_start AND hour_at < $day_end AND pue >= 1
)
SELECT * FROM pue ORDER BY site, hour_at
