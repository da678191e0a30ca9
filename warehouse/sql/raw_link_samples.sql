-- raw_link_samples: the lake's link_samples dataset as is (NVLink per GPU, InfiniBand/RoCE ports per node).
-- kind: view
-- grain: one row per link reading as the collectors wrote it
-- Read through jh_lake_link_samples (warehouse/build_sql/lake_view.sql), the lake contract: a
-- file may lack any optional column (NULL here) and carry extra ones (dropped here).
-- columns: the dataset's columns (collectors/schema.py LINK_SAMPLES; bytes/s per direction, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
SELECT
    "sampled_at", "host", "link_kind", "device", "gpu_index", "gpu_model", "tx_bytes_per_s",
    "rx_bytes_per_s", "capacity_bytes_per_s", "source", date
FROM jh_lake_link_samples
