-- dim_gpu_rows: the rows of dim_gpu of the GPUs with readings on the day checked, only the columns
-- the checks read. dim_gpu holds every GPU ever seen: read whole, a day's warning counted GPUs of
-- other days (the demo's last day warned of 10 trace GPUs it never saw). Not a warehouse relation
-- (no `kind:`): read by warehouse.checks only.
-- grain: one row per gpu_uuid seen on $day (fct_gpu_coverage_daily)
-- columns:
--   gpu_uuid [text] GPU
--   in_inventory [bool] listed in the site inventory
SELECT gpu_uuid, in_inventory
FROM dim_gpu
WHERE gpu_uuid IN (SELECT gpu_uuid FROM fct_gpu_coverage_daily WHERE day = $day::DATE)
