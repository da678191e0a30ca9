-- raw_facility_samples: the lake's facility_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per site meter reading (partition folder host=<site>)
-- Not union_by_name: it would open the footer of every file in the lake at each query (cost
-- growing with history). The dataset's columns are named, not *: the writer gives every file
-- these (NULL where a source lacks one), and a source may add its own after them (NVML's limits
-- and PIDs, a read error); DuckDB takes the first file's schema, so `*` over files with and
-- without such extras fails with "schema mismatch in glob".
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT
        "sampled_at", "site", "facility_power_w", "it_power_w", "outdoor_temp_c", "source",
        date
    FROM read_parquet(
        getvariable('jh_lake') || '/facility_samples/**/*.parquet',
        hive_partitioning = true
    )
)
SELECT * FROM files
