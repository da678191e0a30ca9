-- raw_jobs: the lake's jobs dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per (job, GPU it held)
-- Read through jh_lake_jobs (warehouse/build_sql/lake_view.sql), the lake contract: a file may
-- lack any optional column (NULL here) and carry extra ones (dropped here).
-- Quoted: `user`, `deferrable` and `precision` are SQL keywords.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
SELECT
    "job_id", "host", "gpu_uuid", "started_at", "ended_at", "user", "team", "stage",
    "workload_class", "deferrable", "requests_total", "tokens_total", "samples_total",
    "flops_total", "precision", "batch_size", date
FROM jh_lake_jobs
