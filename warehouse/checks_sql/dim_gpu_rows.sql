-- dim_gpu_rows: every row of dim_gpu (one per GPU; no day: the table is rebuilt whole), only the
-- columns the checks read. Not a warehouse relation (no `kind:`): read by warehouse.checks only.
-- grain: one row per gpu_uuid
-- columns:
--   gpu_uuid [text] GPU
--   in_inventory [bool] listed in the site inventory
SELECT gpu_uuid, in_inventory
FROM dim_gpu
