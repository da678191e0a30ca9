-- gpu_activity_samples: each GPU's readings from its one stream per day, with its activity and memory
-- activity as ratios: the one definition every model that reads activity per sample uses. Which
-- stream and which measure, and why: gpu_activity_streams.sql. A temporary view models.activity
-- creates over a samples relation (activity_input_samples) and the temp table gpu_activity_streams
-- of the days it covers. The measure of each kind is activity_of_kind.sql's.
-- Columns: the samples relation's, plus
--   activity_kind [text] 'sm_active' (DCGM SM activity) | 'util_gpu' (NVML or DCGM utilisation)
--   activity_ratio [0..1] sm_active_ratio, or util_gpu_pct / 100; NULL where the reading lacks it
--   memory_ratio [0..1] dram_active_ratio, or util_mem_pct / 100, by the same kind; NULL likewise
SELECT
    s.*,
    c.activity_kind,
    activity_of_kind(c.activity_kind, s.sm_active_ratio, s.util_gpu_pct) AS activity_ratio,
    activity_of_kind(c.activity_kind, s.dram_active_ratio, s.util_mem_pct) AS memory_ratio
FROM activity_input_samples AS s
JOIN gpu_activity_streams AS c
    ON c.day = s.day AND c.gpu_uuid = s.gpu_uuid AND c.source IS NOT DISTINCT FROM s.source
