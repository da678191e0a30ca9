-- placement_gpu_day: what each GPU did on $day, for consolidation and thermal placement.
-- grain: one row per gpu_uuid with clean readings on $day (gpu_activity_samples: one stream per GPU).
-- input besides: the macro covered_hours (covered_hours.sql: the hours each GPU's readings cover)
--   and its temp view covered_hours_input_coverage (models.recommend_inputs.create_covered_hours_inputs).
-- columns: host, gpu_uuid, gpu_model [text]; mean_activity_ratio [0..1] over the day (SM active,
--   else utilisation: the stream's activity_kind); busy_hours [h] with activity above 5%: that
--   share of the hours the readings cover (the recommender's rule; by the span from the first
--   reading to the last, a GPU read 00:00-01:00 and 23:00-24:00 was busy 24 h, and thermal
--   placement moved a GPU's all-day work for its 2 h, promising 0.048 kWh/day);
--   covered_hours [h] the hours its readings cover (the same rule: consolidation packs only GPUs
--   read for most of the day, the minutes it was not read saying nothing of its work);
--   busy_power_w [W] mean power when busy;
--   idle_power_w [W] median power when not busy (NULL: never idle)
WITH day_rows AS (
    SELECT host, gpu_uuid, gpu_model, sampled_at, CAST(power_w AS DOUBLE) AS power_w,
           activity_ratio AS activity
    FROM gpu_activity_samples
    WHERE day = $day::DATE
)
SELECT d.host, d.gpu_uuid, any_value(d.gpu_model) AS gpu_model,
       avg(d.activity) AS mean_activity_ratio,
       covered_hours(min(d.sampled_at) FILTER (WHERE d.power_w IS NOT NULL),
                     max(d.sampled_at) FILTER (WHERE d.power_w IS NOT NULL), any_value(c.covered_s)) AS covered_hours,
       avg(CASE WHEN d.activity > 0.05 THEN 1.0 WHEN d.activity IS NOT NULL THEN 0.0 END)  -- unread: unknown, not idle
           * covered_hours AS busy_hours,
       avg(d.power_w) FILTER (WHERE d.activity > 0.05) AS busy_power_w,
       median(d.power_w) FILTER (WHERE d.activity <= 0.05) AS idle_power_w
FROM day_rows AS d
LEFT JOIN covered_hours_input_coverage AS c ON c.day = $day::DATE AND c.gpu_uuid = d.gpu_uuid
GROUP BY d.host, d.gpu_uuid
ORDER BY d.host, d.gpu_uuid
