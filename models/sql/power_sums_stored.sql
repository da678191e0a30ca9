-- power_sums_stored: per day of the window, the rows and the build the stored sums of
-- fct_power_fit_sums_hourly were computed from. Read by models.power_features.
-- Parameters: $source VARCHAR (the samples relation), $first_day DATE, $last_day DATE.
-- Columns: day [DATE], n_rows [count], samples_build_id [UUID].
SELECT day, sum(n_rows) AS n_rows, any_value(samples_build_id) AS samples_build_id
FROM fct_power_fit_sums_hourly
WHERE source_relation = $source AND day BETWEEN $first_day AND $last_day
GROUP BY day
