-- raw_facility_samples: the lake's facility_samples dataset as is, read straight from the Parquet files.
-- kind: view
-- grain: one row per site meter reading (partition folder host=<site>)
-- Read through jh_lake_facility_samples (warehouse/build_sql/lake_view.sql), the lake contract: a file may
-- lack any optional column (NULL here) and carry extra ones (dropped here).
-- columns: the dataset's columns (collectors/schema.py; units in the names, times UTC), plus
--   date [DATE] the date= partition (UTC day of the row's time); filter on it so DuckDB reads only those files
SELECT
    "sampled_at", "site", "facility_power_w", "it_power_w", "outdoor_temp_c", "source",
    date
FROM jh_lake_facility_samples
