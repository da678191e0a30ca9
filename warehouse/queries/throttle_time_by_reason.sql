-- Hours of clock throttling per NVML clocks-event reason and GPU model on a day. Params: day.
-- Each reading stands for the time to the next reading of the same GPU and source (at most 60 s);
-- one source per GPU (the one with most readings carrying the bitmask). Bits: nvmlClocksEventReason*.
WITH reasons(bit, reason) AS (
    VALUES (1, 'gpu_idle'), (2, 'applications_clocks_setting'), (4, 'sw_power_cap'),
           (8, 'hw_slowdown'), (16, 'sync_boost'), (32, 'sw_thermal_slowdown'),
           (64, 'hw_thermal_slowdown'), (128, 'hw_power_brake_slowdown'), (256, 'display_clock_setting')
),
sources AS (
    SELECT gpu_uuid, source
    FROM stg_gpu_samples
    WHERE day = $day::DATE AND clock_event_reasons IS NOT NULL
    GROUP BY gpu_uuid, source
    QUALIFY row_number() OVER (PARTITION BY gpu_uuid ORDER BY count(*) DESC, source) = 1
),
readings AS (
    SELECT
        s.gpu_uuid, s.gpu_model, s.clock_event_reasons,
        -- least() skips NULLs, so the day's last reading (no next one) is kept out explicitly
        epoch(lead(s.sampled_at) OVER (PARTITION BY s.gpu_uuid ORDER BY s.sampled_at)) - epoch(s.sampled_at) AS step_s
    FROM stg_gpu_samples AS s
    JOIN sources USING (gpu_uuid, source)
    WHERE s.day = $day::DATE AND s.clock_event_reasons IS NOT NULL
)
SELECT
    r.reason,
    x.gpu_model,
    count(DISTINCT x.gpu_uuid) AS n_gpus,
    sum(least(x.step_s, 60)) / 3600 AS throttled_hours
FROM readings AS x
JOIN reasons AS r ON (x.clock_event_reasons & r.bit) <> 0
WHERE x.step_s IS NOT NULL
GROUP BY ALL
ORDER BY throttled_hours DESC
