-- inventory_bad_value: the first inventory value int_inventory.sql could not cast, by its place in
-- the list (1-based); no row when every value casts. DuckDB itself says, so the check accepts
-- exactly what the build's casts accept (2024-3-1, 2024/03/01, 1e3 ...).
-- parameters: $dates, $numbers, $whole_numbers [VARCHAR[]] the values of the typed columns, empty ones NULL
SELECT 'day (YYYY-MM-DD)' AS kind, i AS place
FROM unnest($dates::VARCHAR[]) WITH ORDINALITY AS t(v, i)
WHERE v IS NOT NULL AND TRY_CAST(trim(v) AS DATE) IS NULL
UNION ALL
SELECT 'number', i
FROM unnest($numbers::VARCHAR[]) WITH ORDINALITY AS t(v, i)
WHERE v IS NOT NULL AND TRY_CAST(trim(v) AS DOUBLE) IS NULL
UNION ALL
SELECT 'whole number', i
FROM unnest($whole_numbers::VARCHAR[]) WITH ORDINALITY AS t(v, i)
WHERE v IS NOT NULL AND TRY_CAST(trim(v) AS SMALLINT) IS NULL
