-- raw_jobs: the lake's jobs dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per (job, GPU it held)
-- The lake contract (ARCHITECTURE.md, "The lake"): a file may lack any optional column (NULL
-- here) and carry extra ones (dropped here); the typed, empty jh_contract_jobs (written by
-- warehouse/lake_contract.py from collectors/schema.py) gives every documented column its type
-- even when no file has it. union_by_name opens every file's footer at each query, so a build
-- narrows the view to the partitions it reads (the variable jh_build_files_jobs, set by
-- warehouse/build.py for the build and NULL again after it); everywhere else: the whole lake.
-- Quoted: `user` and `deferrable`
-- are SQL keywords.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT * FROM jh_contract_jobs
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        coalesce(getvariable('jh_build_files_jobs'), [getvariable('jh_lake') || '/jobs/**/*.parquet']),
        hive_partitioning = true, union_by_name = true
    )
)
SELECT
    "job_id", "host", "gpu_uuid", "started_at", "ended_at", "user", "team", "stage",
    "workload_class", "deferrable", "requests_total", "tokens_total", "samples_total",
    "flops_total", date
FROM files
