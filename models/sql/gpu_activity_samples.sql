-- gpu_activity_samples: each GPU's readings from its one stream per day (gpu_activity_streams.sql:
-- which, and why), with its activity and memory activity as ratios: the one definition every model
-- that reads activity per sample uses. A temporary view models.activity creates over a samples
-- relation (activity_input_samples) and the temp table gpu_activity_streams of the days it covers.
-- Which measure: the power fit's (power_feature_choice.sql, over the chosen streams of the day): SM
-- activity where the GPU model's readings with power carry it on at least half of them, else
-- utilisation; a GPU whose stream does not carry SM activity takes utilisation (a mixed fleet).
-- Columns: the samples relation's, plus
--   activity_kind [text] 'sm_active' (DCGM SM activity) | 'util_gpu' (NVML or DCGM utilisation)
--   activity_ratio [0..1] sm_active_ratio, or util_gpu_pct / 100; NULL where the reading lacks it
--   memory_ratio [0..1] dram_active_ratio, or util_mem_pct / 100, by the same kind; NULL likewise
WITH chosen_rows AS (
    SELECT s.*, c.reads_sm_active
    FROM activity_input_samples AS s
    JOIN gpu_activity_streams AS c
        ON c.day = s.day AND c.gpu_uuid = s.gpu_uuid AND c.source IS NOT DISTINCT FROM s.source
),
model_kind AS (
    -- CASE sums, not FILTER: DuckDB's filtered aggregates cost about 2x here
    SELECT day, gpu_model,
           coalesce(sum(CASE WHEN power_w IS NOT NULL AND sm_active_ratio IS NOT NULL THEN 1 ELSE 0 END)
                    / nullif(count(power_w), 0) >= 0.5, false) AS model_reads_sm_active
    FROM chosen_rows
    GROUP BY day, gpu_model
)
SELECT
    r.* EXCLUDE (reads_sm_active),
    CASE WHEN m.model_reads_sm_active AND r.reads_sm_active THEN 'sm_active' ELSE 'util_gpu' END AS activity_kind,
    CASE WHEN m.model_reads_sm_active AND r.reads_sm_active THEN CAST(r.sm_active_ratio AS DOUBLE)
         ELSE r.util_gpu_pct / 100.0 END AS activity_ratio,
    CASE WHEN m.model_reads_sm_active AND r.reads_sm_active THEN CAST(r.dram_active_ratio AS DOUBLE)
         ELSE r.util_mem_pct / 100.0 END AS memory_ratio
FROM chosen_rows AS r
JOIN model_kind AS m ON m.day = r.day AND m.gpu_model IS NOT DISTINCT FROM r.gpu_model
