-- raw_node_samples: the lake's node_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per IPMI (BMC) reading of a server
-- Read through jh_lake_node_samples (warehouse/build_sql/lake_view.sql), the lake contract: a file may
-- lack any optional column (NULL here) and carry extra ones (dropped here).
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
SELECT
    "sampled_at", "host", "power_w", "sdr_power_w", "inlet_temp_c", "exhaust_temp_c",
    "fan_rpm_avg", "source", "power_w_null_reason", date
FROM jh_lake_node_samples
