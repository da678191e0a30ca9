-- gpu_activity_streams: for each GPU and day, the one stream of readings (source) that the power fit
-- and every model reading activity take that GPU's readings from, and which measure of activity.
-- Why one: a GPU read by NVML every second and by DCGM through Prometheus (the README's node setup)
-- has two streams. Row by row they mix NVML's utilisation (the share of time any kernel ran) with
-- DCGM's SM activity, count the GPU's time once per stream, and in the fit's feature choice NVML's
-- 1 Hz rows outnumbered DCGM's (30 s steps) 30 to 1, so the fit never used DCGM's fields.
-- Which stream, over readings with power (the fit's rows): one carrying SM activity on at least half
-- of them (DCGM profiling) first, the one with most SM activity readings; else the one with most
-- utilisation readings; then most readings with power, most readings; ties: the source's name.
-- Which measure: the power fit's (power_feature_choice.sql) over the chosen streams of the day: SM
-- activity where the GPU model's readings with power carry it on at least half of them, else
-- utilisation; a GPU whose stream does not carry SM activity takes utilisation (a mixed fleet).
-- Input: stream_input_samples (temp view over the samples relation), days $first_day..$last_day.
-- Columns: day [DATE]; gpu_uuid [text]; source [text] the stream chosen;
--   reads_sm_active [bool] it carries SM activity on at least half its readings with power;
--   activity_kind [text] 'sm_active' (DCGM SM activity) | 'util_gpu' (NVML or DCGM utilisation);
--   n_streams [count] streams the GPU had that day (1: nothing was left out)
WITH streams AS (
    SELECT day, gpu_uuid, source,
           any_value(gpu_model) AS gpu_model,
           count(*) AS n,
           count(power_w) AS n_power,
           sum(CASE WHEN power_w IS NOT NULL AND sm_active_ratio IS NOT NULL THEN 1 ELSE 0 END) AS n_power_sm_active,
           sum(CASE WHEN power_w IS NOT NULL AND util_gpu_pct IS NOT NULL THEN 1 ELSE 0 END) AS n_power_util_gpu
    FROM stream_input_samples
    WHERE day BETWEEN $first_day::DATE AND $last_day::DATE
    GROUP BY day, gpu_uuid, source
),
chosen AS (
    -- streams' columns by name, not *: sqlglot's QUALIFY for Spark (a subquery) repeats the
    -- computed columns after a *, and Spark cannot tell the copies apart
    SELECT day, gpu_uuid, source, gpu_model, n, n_power, n_power_sm_active, n_power_util_gpu,
           n_power > 0 AND n_power_sm_active >= 0.5 * n_power AS reads_sm_active,
           count(*) OVER (PARTITION BY day, gpu_uuid) AS n_streams
    FROM streams
    QUALIFY row_number() OVER (
        PARTITION BY day, gpu_uuid
        ORDER BY (n_power > 0 AND n_power_sm_active >= 0.5 * n_power) DESC, n_power_sm_active DESC,
                 n_power_util_gpu DESC, n_power DESC, n DESC, source NULLS LAST
    ) = 1
),
model_kind AS (
    SELECT day, gpu_model,
           coalesce(sum(n_power_sm_active) / nullif(sum(n_power), 0) >= 0.5, false) AS model_reads_sm_active
    FROM chosen
    GROUP BY day, gpu_model
)
SELECT c.day, c.gpu_uuid, c.source, c.reads_sm_active,
       CASE WHEN m.model_reads_sm_active AND c.reads_sm_active THEN 'sm_active' ELSE 'util_gpu' END AS activity_kind,
       c.n_streams
FROM chosen AS c
JOIN model_kind AS m ON m.day = c.day AND m.gpu_model IS NOT DISTINCT FROM c.gpu_model
