-- recommend_exact_tenths: the exact tenths of each GPU's busy samples, by sorting them (ntile), as
-- recommend_gpu_profile computed them before its histogram; the reference its tolerances are tested against.
-- Grain: gpu_uuid, rows of `reco_input_samples` with day = $day, activity above 5%.
-- Columns: gpu_uuid, activity_deciles (0..1, mean activity per tenth, lowest first),
--   locked_share_deciles (0..1, share of samples under an application clock lock, reason bit 0x2),
--   locked_clock_mhz_deciles (MHz, mean SM clock of those samples; NULL when none).
WITH busy AS (
    SELECT gpu_uuid, sampled_at, sm_clock_mhz,
           activity_ratio AS activity,
           coalesce((clock_event_reasons & 2) <> 0, false) AND sm_clock_mhz IS NOT NULL AS clock_locked
    FROM reco_input_samples
    WHERE day = $day AND power_w IS NOT NULL
),
busy_tenths AS (
    SELECT *, ntile(10) OVER (PARTITION BY gpu_uuid ORDER BY activity, sampled_at) AS tenth
    FROM busy WHERE activity > 0.05
),
per_tenth AS (
    SELECT gpu_uuid, tenth, avg(activity) AS activity,
           avg(CASE WHEN clock_locked THEN 1.0 ELSE 0.0 END) AS locked_share,
           avg(sm_clock_mhz) FILTER (WHERE clock_locked) AS locked_clock_mhz
    FROM busy_tenths GROUP BY gpu_uuid, tenth
)
SELECT gpu_uuid, list(activity ORDER BY tenth) AS activity_deciles,
       list(locked_share ORDER BY tenth) AS locked_share_deciles,
       list(locked_clock_mhz ORDER BY tenth) AS locked_clock_mhz_deciles
FROM per_tenth GROUP BY gpu_uuid HAVING count(*) = 10
ORDER BY gpu_uuid
