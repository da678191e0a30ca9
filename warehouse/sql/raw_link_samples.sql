-- raw_link_samples: the lake's link_samples dataset as is (NVLink per GPU, InfiniBand/RoCE ports per node).
-- kind: view
-- grain: one row per link reading as the collectors wrote it
-- The dataset's columns are named, not * (see raw_gpu_samples.sql for why).
-- columns: the dataset's columns (collectors/schema.py LINK_SAMPLES; bytes/s per direction, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
WITH files AS (
    SELECT
        "sampled_at", "host", "link_kind", "device", "gpu_index", "gpu_model", "tx_bytes_per_s",
        "rx_bytes_per_s", "capacity_bytes_per_s", "source", date
    FROM read_parquet(
        getvariable('jh_lake') || '/link_samples/**/*.parquet',
        hive_partitioning = true
    )
)
SELECT * FROM files
