-- placement_activity_minutely: each GPU's mean activity per minute of $day, for packing light work.
-- grain: one row per (gpu_uuid, minute_at). columns: host, gpu_uuid [text]; minute_at
--   [TIMESTAMPTZ, UTC]; activity_ratio [0..1] mean SM activity (else utilisation) in the minute,
--   from the GPU's one activity stream (gpu_activity_samples)
SELECT host, gpu_uuid, time_bucket(INTERVAL 1 minute, sampled_at) AS minute_at,
       avg(activity_ratio) AS activity_ratio
FROM gpu_activity_samples
WHERE day = $day::DATE
GROUP BY ALL
