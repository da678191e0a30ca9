-- raw_facility_samples: the lake's facility_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per site meter reading (partition folder host=<site>)
-- Not union_by_name: it would open the footer of every file in the lake at each query (cost
-- growing with history); the writer conforms every file to the schema, so the first file's holds.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT *
    FROM read_parquet(
        getvariable('jh_lake') || '/facility_samples/**/*.parquet',
        hive_partitioning = true
    )
)
SELECT * FROM files
