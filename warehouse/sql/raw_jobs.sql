-- raw_jobs: the lake's jobs dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per (job, GPU it held)
-- Not union_by_name: it would open the footer of every file in the lake at each query (cost
-- growing with history). The dataset's columns are named, not *: the writer gives every file
-- these (NULL where a source lacks one), and a source may add its own after them (NVML's limits
-- and PIDs, a read error); DuckDB takes the first file's schema, so `*` over files with and
-- without such extras fails with "schema mismatch in glob". Quoted: `user` and `deferrable`
-- are SQL keywords.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT
        "job_id", "host", "gpu_uuid", "started_at", "ended_at", "user", "team", "stage",
        "workload_class", "deferrable", "requests_total", "tokens_total", "samples_total",
        "flops_total", date
    FROM read_parquet(
        getvariable('jh_lake') || '/jobs/**/*.parquet',
        hive_partitioning = true
    )
)
SELECT * FROM files
