-- power_sums_builds: per day of the window, the warehouse build of its samples and whether
-- retention has deleted them since (power_sums_build_ids). Read by models.power_features.
-- Parameters: $first_day DATE, $last_day DATE.
-- Columns: day [DATE], build_id [UUID], readings_pruned [bool].
SELECT day, build_id, readings_pruned
FROM power_sums_build_ids
WHERE day BETWEEN $first_day AND $last_day
