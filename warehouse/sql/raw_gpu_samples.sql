-- raw_gpu_samples: the lake's gpu_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per GPU reading as the collectors wrote it (duplicates and bad values included)
-- The lake contract (ARCHITECTURE.md, "The lake"): a file may lack any optional column (NULL
-- here) and carry extra ones (dropped here); the typed, empty jh_contract_gpu_samples (written by
-- warehouse/lake_contract.py from collectors/schema.py) gives every documented column its type
-- even when no file has it. union_by_name opens every file's footer at each query, so a build
-- narrows the view to the partitions it reads (the variable jh_build_files_gpu_samples, set by
-- warehouse/build.py for the build and NULL again after it); everywhere else: the whole lake.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT * FROM jh_contract_gpu_samples
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        coalesce(getvariable('jh_build_files_gpu_samples'), [getvariable('jh_lake') || '/gpu_samples/**/*.parquet']),
        hive_partitioning = true, union_by_name = true
    )
)
SELECT
    "sampled_at", "host", "gpu_index", "gpu_uuid", "gpu_model", "power_w",
    "energy_mj_total", "temp_c", "mem_temp_c", "sm_clock_mhz", "mem_clock_mhz",
    "util_gpu_pct", "util_mem_pct", "sm_active_ratio", "sm_occupancy_ratio",
    "tensor_active_ratio", "dram_active_ratio", "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s", "power_limit_w", "mem_used_mib", "pstate",
    "clock_event_reasons", "source", date
FROM files
