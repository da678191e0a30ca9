-- raw_agent_audit: the lake's agent_audit dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per action a node agent took on a recommended config
-- Not union_by_name: it would open the footer of every file in the lake at each query (cost
-- growing with history). The dataset's columns are named, not *: the writer gives every file
-- these (NULL where a source lacks one), and a source may add its own after them (NVML's limits
-- and PIDs, a read error); DuckDB takes the first file's schema, so `*` over files with and
-- without such extras fails with "schema mismatch in glob".
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT
        "audited_at", "host", "gpu_uuid", "action", "config_sha256", "power_limit_w_before",
        "power_limit_w_requested", "power_limit_w_after", "reason", date
    FROM read_parquet(
        getvariable('jh_lake') || '/agent_audit/**/*.parquet',
        hive_partitioning = true
    )
)
SELECT * FROM files
