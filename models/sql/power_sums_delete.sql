-- power_sums_delete: delete the stored sums of the given days before they are summed again.
-- Parameters: $source VARCHAR (the samples relation), $days DATE[].
DELETE FROM fct_power_fit_sums_hourly
WHERE source_relation = $source AND list_contains($days, day)
