-- power_sums_build_ids_warehouse: the body of the temp view power_sums_build_ids when the fit reads
-- the warehouse's own stg_gpu_samples: each day's build (fct_warehouse_build_daily) and whether
-- retention has since deleted its readings. Created by models.power_features.
-- Columns: day [DATE], build_id [UUID], readings_pruned [bool].
SELECT day, build_id, readings_pruned_at IS NOT NULL AS readings_pruned
FROM fct_warehouse_build_daily
