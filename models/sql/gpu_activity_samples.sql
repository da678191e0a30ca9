-- gpu_activity_samples: each GPU's readings from one activity stream per day, with its activity and
-- memory activity as ratios: the one definition every model that reads activity per sample uses.
-- A temporary view models.activity creates over a samples relation (stg_gpu_samples by default,
-- seen here as the temporary view activity_input_samples).
-- Why one stream: a GPU read by NVML every second and by DCGM through Prometheus has two streams.
-- Taking each row's coalesce(sm_active_ratio, util_gpu_pct / 100) averages DCGM's SM activity with
-- NVML's utilisation (the share of time any kernel ran: higher) and counts the GPU's time once per
-- stream, so busy hours, activity tenths and hourly activity depended on how often each source read.
-- Which kind: the power fit's (power_feature_choice.sql, over the day): SM activity where the GPU
-- model's readings with power carry it on at least half of them, else utilisation; a GPU none of
-- whose streams carries SM activity on half its readings takes utilisation (a mixed fleet).
-- Which stream: the source with the most readings of that kind that day (ties: the source's name);
-- a GPU that moved hosts keeps every host's readings of that source.
-- Columns: the samples relation's, plus
--   activity_kind [text] 'sm_active' (DCGM SM activity) | 'util_gpu' (NVML or DCGM utilisation)
--   activity_ratio [0..1] sm_active_ratio, or util_gpu_pct / 100; NULL where the reading lacks it
--   memory_ratio [0..1] dram_active_ratio, or util_mem_pct / 100, by the same kind; NULL likewise
WITH stream_counts AS (
    -- CASE sums, not FILTER: DuckDB's filtered aggregates cost about 2x here
    SELECT day, gpu_model, gpu_uuid, source,
           count(*) AS n,
           count(sm_active_ratio) AS n_sm_active,
           count(util_gpu_pct) AS n_util_gpu,
           sum(CASE WHEN power_w IS NOT NULL THEN 1 ELSE 0 END) AS n_power,
           sum(CASE WHEN power_w IS NOT NULL AND sm_active_ratio IS NOT NULL THEN 1 ELSE 0 END) AS n_power_sm_active
    FROM activity_input_samples
    GROUP BY day, gpu_model, gpu_uuid, source
),
model_kind AS (
    SELECT day, gpu_model,
           coalesce(sum(n_power_sm_active) / nullif(sum(n_power), 0) >= 0.5, false) AS model_reads_sm_active
    FROM stream_counts
    GROUP BY day, gpu_model
),
gpu_streams AS (
    SELECT c.day, c.gpu_uuid, c.source, c.n_sm_active, c.n_util_gpu,
           bool_or(m.model_reads_sm_active AND c.n_sm_active >= 0.5 * c.n)
               OVER (PARTITION BY c.day, c.gpu_uuid) AS reads_sm_active
    FROM stream_counts AS c
    JOIN model_kind AS m ON m.day = c.day AND m.gpu_model IS NOT DISTINCT FROM c.gpu_model
),
chosen AS (
    SELECT day, gpu_uuid, source,
           CASE WHEN reads_sm_active THEN 'sm_active' ELSE 'util_gpu' END AS activity_kind
    FROM gpu_streams
    QUALIFY row_number() OVER (
        PARTITION BY day, gpu_uuid
        ORDER BY CASE WHEN reads_sm_active THEN n_sm_active ELSE n_util_gpu END DESC, source NULLS LAST
    ) = 1
)
SELECT
    s.*,
    c.activity_kind,
    CASE WHEN c.activity_kind = 'sm_active' THEN CAST(s.sm_active_ratio AS DOUBLE)
         ELSE s.util_gpu_pct / 100.0 END AS activity_ratio,
    CASE WHEN c.activity_kind = 'sm_active' THEN CAST(s.dram_active_ratio AS DOUBLE)
         ELSE s.util_mem_pct / 100.0 END AS memory_ratio
FROM activity_input_samples AS s
JOIN chosen AS c
    ON c.day = s.day AND c.gpu_uuid = s.gpu_uuid AND c.source IS NOT DISTINCT FROM s.source
