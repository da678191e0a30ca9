-- sensitivity_pue_hourly: the inputs of the PUE regressions, one row per site-hour of $day.
-- Grain: site x hour_at (UTC), hours with a PUE, covered >= $min_coverage_ratio.
-- Inputs: fct_pue_hourly (pue, it_energy_kwh, coverage_ratio), raw_facility_samples (outdoor_temp_c).
-- Columns: site, hour_at (TIMESTAMPTZ), pue (ratio), it_load_kw (kW: IT energy over the covered
--   part of the hour / covered hours), outdoor_temp_c (C, hourly mean; NULL where never read).
-- models.sensitivity fits pue = b0 + b_temp*outdoor_temp_c + b_load*it_load_kw per site and day
-- (ordinary least squares, 24 rows a day: few enough to fetch).
WITH outdoor AS (
    SELECT site, date_trunc('hour', sampled_at) AS hour_at, avg(outdoor_temp_c) AS outdoor_temp_c
    FROM raw_facility_samples
    WHERE date = $day AND outdoor_temp_c IS NOT NULL
    GROUP BY site, date_trunc('hour', sampled_at)
)
SELECT
    p.site,
    p.hour_at,
    p.pue,
    p.it_energy_kwh / p.coverage_ratio AS it_load_kw,
    o.outdoor_temp_c
FROM fct_pue_hourly AS p
LEFT JOIN outdoor AS o ON o.site = p.site AND o.hour_at = p.hour_at
WHERE p.day = $day
  AND p.pue IS NOT NULL
  AND p.coverage_ratio >= $min_coverage_ratio
ORDER BY p.site, p.hour_at
