-- raw_agent_audit: the lake's agent_audit dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per action a node agent took on a recommended config
-- The lake contract (ARCHITECTURE.md, "The lake"): a file may lack any optional column (NULL
-- here) and carry extra ones (dropped here); the typed, empty jh_contract_agent_audit (written by
-- warehouse/lake_contract.py from collectors/schema.py) gives every documented column its type
-- even when no file has it. union_by_name opens every file's footer at each query, so a build
-- narrows the view to the partitions it reads (the variable jh_build_files_agent_audit, set by
-- warehouse/build.py for the build and NULL again after it); everywhere else: the whole lake.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT * FROM jh_contract_agent_audit
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        coalesce(getvariable('jh_build_files_agent_audit'), [getvariable('jh_lake') || '/agent_audit/**/*.parquet']),
        hive_partitioning = true, union_by_name = true
    )
)
SELECT
    "audited_at", "host", "gpu_uuid", "action", "config_sha256", "power_limit_w_before",
    "power_limit_w_requested", "power_limit_w_after", "reason", date
FROM files
