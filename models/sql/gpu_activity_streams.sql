-- gpu_activity_streams: for each GPU and day, the one stream of readings (source) that the power fit
-- and every model reading activity take that GPU's readings from.
-- Why one: a GPU read by NVML every second and by DCGM through Prometheus (the README's node setup)
-- has two streams. Row by row they mix NVML's utilisation (the share of time any kernel ran) with
-- DCGM's SM activity, count the GPU's time once per stream, and in the fit's feature choice NVML's
-- 1 Hz rows outnumbered DCGM's (30 s steps) 30 to 1, so the fit never used DCGM's fields.
-- Rule, over readings with power (the fit's rows): a stream carrying SM activity on at least half of
-- them (DCGM profiling) first, the one with most SM activity readings; else the one with most
-- utilisation readings; then most readings with power, most readings; ties: the source's name.
-- Input: stream_input_samples (temp view over the samples relation), days $first_day..$last_day.
-- Columns: day [DATE]; gpu_uuid [text]; source [text] the stream chosen;
--   reads_sm_active [bool] it carries SM activity on at least half its readings with power;
--   n_streams [count] streams the GPU had that day (1: nothing was left out)
WITH streams AS (
    SELECT day, gpu_uuid, source,
           count(*) AS n,
           count(power_w) AS n_power,
           sum(CASE WHEN power_w IS NOT NULL AND sm_active_ratio IS NOT NULL THEN 1 ELSE 0 END) AS n_power_sm_active,
           sum(CASE WHEN power_w IS NOT NULL AND util_gpu_pct IS NOT NULL THEN 1 ELSE 0 END) AS n_power_util_gpu
    FROM stream_input_samples
    WHERE day BETWEEN $first_day::DATE AND $last_day::DATE
    GROUP BY day, gpu_uuid, source
),
ranked AS (
    SELECT *,
           n_power > 0 AND n_power_sm_active >= 0.5 * n_power AS reads_sm_active,
           count(*) OVER (PARTITION BY day, gpu_uuid) AS n_streams
    FROM streams
)
SELECT day, gpu_uuid, source, reads_sm_active, n_streams
FROM ranked
QUALIFY row_number() OVER (
    PARTITION BY day, gpu_uuid
    ORDER BY reads_sm_active DESC, n_power_sm_active DESC, n_power_util_gpu DESC, n_power DESC, n DESC,
             source NULLS LAST
) = 1
