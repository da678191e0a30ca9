-- raw_node_samples: the lake's node_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per IPMI (BMC) reading of a server
-- The lake contract (ARCHITECTURE.md, "The lake"): a file may lack any optional column (NULL
-- here) and carry extra ones (dropped here); the typed, empty jh_contract_node_samples (written by
-- warehouse/lake_contract.py from collectors/schema.py) gives every documented column its type
-- even when no file has it. union_by_name opens every file's footer at each query, so a build
-- narrows the view to the partitions it reads (the variable jh_build_files_node_samples, set by
-- warehouse/build.py for the build and NULL again after it); everywhere else: the whole lake.
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT * FROM jh_contract_node_samples
    UNION ALL BY NAME
    SELECT * FROM read_parquet(
        coalesce(getvariable('jh_build_files_node_samples'), [getvariable('jh_lake') || '/node_samples/**/*.parquet']),
        hive_partitioning = true, union_by_name = true
    )
)
SELECT
    "sampled_at", "host", "power_w", "sdr_power_w", "inlet_temp_c", "exhaust_temp_c",
    "fan_rpm_avg", "source", date
FROM files
