-- readings_day_state: whether a day's clean readings (stg_gpu_samples) are there to query: the
-- day built or not, and when a later build took its readings out under
-- warehouse.readings_retention_days. One row; built false for a day never built.
-- parameters: $day [DATE]
-- columns: built [bool], readings_pruned_at [TIMESTAMPTZ, UTC] NULL while the readings are kept
SELECT count(*) > 0 AS built, max(readings_pruned_at) AS readings_pruned_at
FROM fct_warehouse_build_daily
WHERE day = $day::DATE
