-- readings_cutoff: the newest day whose clean readings (stg_gpu_samples) a build deletes under
-- warehouse.readings_retention_days: the retention counted back from the newest day built, so a
-- backfill of an old day does not delete the recent days' readings. The day being built is
-- never deleted, whatever its age: its own DAG run's tasks read it (warehouse.build.prune_readings).
-- parameters: $retention_days [INTEGER, days > 0]
-- columns: cutoff_day [DATE] days <= this lose their readings (NULL: nothing built yet)
SELECT max(day) - CAST($retention_days AS INTEGER) AS cutoff_day
FROM fct_warehouse_build_daily
