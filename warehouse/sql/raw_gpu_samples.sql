-- raw_gpu_samples: the lake's gpu_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per GPU reading as the collectors wrote it (duplicates and bad values included)
-- Not union_by_name: it would open the footer of every file in the lake at each query (cost
-- growing with history). The dataset's columns are named, not *: the writer gives every file
-- these (NULL where a source lacks one), and a source may add its own after them (NVML's limits
-- and PIDs, a read error); DuckDB takes the first file's schema, so `*` over files with and
-- without such extras fails with "schema mismatch in glob".
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT
        "sampled_at", "host", "gpu_index", "gpu_uuid", "gpu_model", "power_w",
        "energy_mj_total", "temp_c", "mem_temp_c", "sm_clock_mhz", "mem_clock_mhz",
        "util_gpu_pct", "util_mem_pct", "sm_active_ratio", "sm_occupancy_ratio",
        "tensor_active_ratio", "dram_active_ratio", "pcie_tx_bytes_per_s",
        "pcie_rx_bytes_per_s", "power_limit_w", "mem_used_mib", "pstate",
        "clock_event_reasons", "source", date
    FROM read_parquet(
        getvariable('jh_lake') || '/gpu_samples/**/*.parquet',
        hive_partitioning = true
    )
)
SELECT * FROM files
