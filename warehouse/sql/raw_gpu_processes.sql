-- raw_gpu_processes: the lake's gpu_processes dataset (the collector's process map) as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per (GPU, compute process) per poll of the process map
-- Read through jh_lake_gpu_processes (warehouse/build_sql/lake_view.sql), the lake contract: a
-- file may lack any optional column (NULL here) and carry extra ones (dropped here). `ingest
-- slurm` reads it to place a job holding part of a node on the GPUs its processes ran on.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
SELECT
    "sampled_at", "host", "gpu_index", "gpu_uuid", "pid", "used_gpu_memory_mib", "scheduler",
    "job_id", "pod_uid", "container_id", "source", date
FROM jh_lake_gpu_processes
