-- dim_gpu_gate: the blocking rule on dim_gpu (rebuilt whole, no day), counted: one row per GPU.
-- Not a warehouse relation (no `kind:`): read by warehouse.gate only.
-- grain: one row
-- columns:
--   n_rows [count] GPUs
--   duplicate_uuid_rows [count] rows whose gpu_uuid another row has too (every copy; NULL is none)
--   duplicate_uuid_examples [list] up to 3 such gpu_uuid
WITH copies AS (
    SELECT gpu_uuid, count(*) OVER (PARTITION BY gpu_uuid) AS key_rows
    FROM dim_gpu
)
SELECT
    count(*) AS n_rows,
    count(*) FILTER (WHERE key_rows > 1 AND gpu_uuid IS NOT NULL) AS duplicate_uuid_rows,
    list(DISTINCT gpu_uuid ORDER BY gpu_uuid) FILTER (WHERE key_rows > 1 AND gpu_uuid IS NOT NULL)[1:3]
        AS duplicate_uuid_examples
FROM copies
