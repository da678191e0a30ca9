-- raw_gpu_processes: the lake's gpu_processes dataset (the collector's process map) as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per (GPU, compute process) per poll of the process map
-- Not union_by_name: it would open the footer of every file in the lake at each query (cost
-- growing with history). The dataset's columns are named, not *: the writer gives every file
-- these (NULL where a source lacks one), and a source may add its own after them. `ingest slurm`
-- reads it to place a job holding part of a node on the GPUs its processes ran on.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT * FROM jh_contract_gpu_processes
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        coalesce(getvariable('jh_build_files_gpu_processes'), [getvariable('jh_lake') || '/gpu_processes/**/*.parquet']),
        hive_partitioning = true, union_by_name = true
    )
)
SELECT
    "sampled_at", "host", "gpu_index", "gpu_uuid", "pid", "used_gpu_memory_mib", "scheduler",
    "job_id", "pod_uid", "container_id", "source", date
FROM files
