-- power_several_sources: whether the fit's samples hold more than one source in the window (a
-- count of distinct values, far cheaper than choosing one stream per GPU and day).
-- Not a relation: read by models.power_features. Input: the temp view power_samples_source.
-- Parameters: $first_day DATE, $last_day DATE. Columns: several [bool].
SELECT count(DISTINCT source) > 1 AS several
FROM power_samples_source
WHERE day BETWEEN $first_day AND $last_day
