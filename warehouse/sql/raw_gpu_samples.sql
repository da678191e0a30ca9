-- raw_gpu_samples: the lake's gpu_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per GPU reading as the collectors wrote it (duplicates and bad values included)
-- Read through jh_lake_gpu_samples (warehouse/build_sql/lake_view.sql), the lake contract: a file may
-- lack any optional column (NULL here) and carry extra ones (dropped here).
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
SELECT
    "sampled_at", "host", "gpu_index", "gpu_uuid", "gpu_model", "power_w",
    "energy_mj_total", "temp_c", "mem_temp_c", "sm_clock_mhz", "mem_clock_mhz",
    "util_gpu_pct", "util_mem_pct", "sm_active_ratio", "sm_occupancy_ratio",
    "tensor_active_ratio", "dram_active_ratio", "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s", "power_limit_w", "mem_used_mib", "pstate",
    "clock_event_reasons", "source", "power_limit_min_w", "power_limit_max_w",
    "power_limit_default_w", date
FROM jh_lake_gpu_samples
