-- power_sums_stored: per day of the window, the rows and the build the stored sums of
-- fct_power_fit_sums_hourly were computed from. Read by models.power_features.
-- Parameters: $source VARCHAR (the samples relation), $first_day DATE, $last_day DATE.
-- Columns: day [DATE], n_rows [count], samples_build_id [UUID], rules_sha256 [text] (NULL where any
-- row of the day has none: summed before the rules were recorded).
SELECT day, sum(n_rows) AS n_rows, any_value(samples_build_id) AS samples_build_id,
       CASE WHEN count(rules_sha256) = count(*) THEN min(rules_sha256) END AS rules_sha256
FROM fct_power_fit_sums_hourly
WHERE source_relation = $source AND day BETWEEN $first_day AND $last_day
GROUP BY day
