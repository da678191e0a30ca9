-- raw_agent_audit: the lake's agent_audit dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per action a node agent took on a recommended config
-- Read through jh_lake_agent_audit (warehouse/build_sql/lake_view.sql), the lake contract: a file may
-- lack any optional column (NULL here) and carry extra ones (dropped here).
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
SELECT
    "audited_at", "host", "gpu_uuid", "action", "config_sha256", "power_limit_w_before",
    "power_limit_w_requested", "power_limit_w_after", "reason", date
FROM jh_lake_agent_audit
