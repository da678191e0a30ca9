-- placement_gpu_day: what each GPU did on $day, for consolidation and thermal placement.
-- grain: one row per gpu_uuid with clean readings on $day (gpu_activity_samples: one stream per GPU).
-- columns: host, gpu_uuid, gpu_model [text]; mean_activity_ratio [0..1] over the day (SM active,
--   else utilisation: the stream's activity_kind); busy_hours [h] with activity above 5%;
--   busy_power_w [W] mean power when busy;
--   idle_power_w [W] median power when not busy (NULL: never idle)
WITH day_rows AS (
    SELECT host, gpu_uuid, gpu_model, sampled_at, CAST(power_w AS DOUBLE) AS power_w,
           activity_ratio AS activity
    FROM gpu_activity_samples
    WHERE day = $day::DATE
),
span AS (
    SELECT gpu_uuid, (epoch(max(sampled_at)) - epoch(min(sampled_at))) / 3600.0 AS covered_hours
    FROM day_rows GROUP BY gpu_uuid
)
SELECT d.host, d.gpu_uuid, any_value(d.gpu_model) AS gpu_model,
       avg(d.activity) AS mean_activity_ratio,
       avg(CASE WHEN d.activity > 0.05 THEN 1.0 WHEN d.activity IS NOT NULL THEN 0.0 END)  -- unread: unknown, not idle
           * any_value(s.covered_hours) AS busy_hours,
       avg(d.power_w) FILTER (WHERE d.activity > 0.05) AS busy_power_w,
       median(d.power_w) FILTER (WHERE d.activity <= 0.05) AS idle_power_w
FROM day_rows AS d JOIN span AS s USING (gpu_uuid)
GROUP BY d.host, d.gpu_uuid
ORDER BY d.host, d.gpu_uuid
