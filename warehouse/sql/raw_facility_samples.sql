-- raw_facility_samples: the lake's facility_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per site meter reading (partition folder host=<site>)
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT *
    FROM read_parquet(
        getvariable('jh_lake') || '/facility_samples/**/*.parquet',
        hive_partitioning = true,
        union_by_name = true
    )
)
SELECT * FROM files
