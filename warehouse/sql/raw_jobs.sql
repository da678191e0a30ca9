-- raw_jobs: the lake's jobs dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per (job, GPU it held)
-- union_by_name, unlike the readings' views: jobs files are few (one per host and day, small),
-- and files written before `precision` and `batch_size` existed lack them (NULL there). The
-- dataset's columns are named, not *, so a source's extra columns stay out. Quoted: `user`,
-- `deferrable` and `precision` are SQL keywords.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH lake AS (
    SELECT *
    FROM read_parquet(
        getvariable('jh_lake') || '/jobs/**/*.parquet',
        hive_partitioning = true,
        union_by_name = true
    )
),
-- The optional columns added later, typed, for a lake none of whose files has them yet.
with_optional AS (
    SELECT * FROM lake
    UNION ALL BY NAME
    SELECT CAST(NULL AS VARCHAR) AS "precision", CAST(NULL AS INTEGER) AS "batch_size" WHERE false
),
files AS (
    SELECT
        "job_id", "host", "gpu_uuid", "started_at", "ended_at", "user", "team", "stage",
        "workload_class", "deferrable", "requests_total", "tokens_total", "samples_total",
        "flops_total", "precision", "batch_size", date
    FROM with_optional
)
SELECT * FROM files
