-- inventory_bad_value: the first inventory value int_inventory.sql could not cast, by its place in
-- the list (1-based); no row when every value casts. DuckDB itself says, so the check accepts
-- exactly what the build's casts accept (2024-3-1, 2024/03/01, 1e3 ...).
-- An amount (a price, a footprint) must also be finite and 0 or more, a lifetime finite and above 0.
-- parameters: $dates, $amounts, $lifetimes, $whole_numbers [VARCHAR[]] the values of the typed
--   columns, empty ones NULL
SELECT 'day (YYYY-MM-DD)' AS kind, i AS place
FROM unnest($dates::VARCHAR[]) WITH ORDINALITY AS t(v, i)
WHERE v IS NOT NULL AND TRY_CAST(trim(v) AS DATE) IS NULL
UNION ALL
SELECT 'finite number, 0 or more', i
FROM unnest($amounts::VARCHAR[]) WITH ORDINALITY AS t(v, i)
WHERE v IS NOT NULL AND NOT coalesce(isfinite(TRY_CAST(trim(v) AS DOUBLE)) AND TRY_CAST(trim(v) AS DOUBLE) >= 0, false)
UNION ALL
SELECT 'finite number above 0', i
FROM unnest($lifetimes::VARCHAR[]) WITH ORDINALITY AS t(v, i)
WHERE v IS NOT NULL AND NOT coalesce(isfinite(TRY_CAST(trim(v) AS DOUBLE)) AND TRY_CAST(trim(v) AS DOUBLE) > 0, false)
UNION ALL
SELECT 'whole number', i
FROM unnest($whole_numbers::VARCHAR[]) WITH ORDINALITY AS t(v, i)
WHERE v IS NOT NULL AND TRY_CAST(trim(v) AS SMALLINT) IS NULL
