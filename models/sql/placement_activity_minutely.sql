-- placement_activity_minutely: each light GPU's activity per minute of $day, for packing light work.
-- grain: one row per (gpu_uuid, minute_at) of $day that the GPU's readings with activity cover; a
--   minute none covers has no row: its activity is unknown, not idle.
-- Time a reading stands for: its interval_s (to its stream's next energy reading) where the day's
--   energy bridged it, at most $max_counter_gap_s from a reading with its counter, $max_gap_s from
--   one without (fct_job_energy_hourly weighs a reading the same way); otherwise none (a gap, the
--   stream's last reading). A reading without activity stands for unknown time. By the mean of
--   the readings inside each minute, readings further apart than a minute left most minutes
--   empty, and the packing summed those as idle: four GPUs read every 300 s at staggered instants
--   summed one GPU's activity per minute, and work needing 3 GPUs was packed onto 1.
-- Parameters: $day DATE; $gpu_uuids VARCHAR[] the GPUs to read (consolidation's light ones);
--   $max_gap_s, $max_counter_gap_s DOUBLE (warehouse.*, as the day was built).
-- columns: host, gpu_uuid [text]; minute_at [TIMESTAMPTZ, UTC] start of the minute;
--   activity_ratio [0..1] time-weighted mean SM activity (else utilisation) of the readings
--   covering the minute, from the GPU's one activity stream (gpu_activity_samples);
--   covered_s [s] how much of the minute they cover
WITH spans AS (
    SELECT host, gpu_uuid, activity_ratio, epoch_us(sampled_at) AS start_us,
           epoch_us(sampled_at) + CAST(interval_s * 1e6 AS BIGINT) AS end_us
    FROM gpu_activity_samples
    WHERE day = $day::DATE AND list_contains($gpu_uuids, gpu_uuid) AND activity_ratio IS NOT NULL
      AND interval_s > 0
      AND interval_s <= CASE WHEN energy_mj_total IS NOT NULL THEN $max_counter_gap_s ELSE $max_gap_s END
),
minute_spans AS (
    SELECT *, start_us // 60000000 AS first_minute, (end_us - 1) // 60000000 AS last_minute FROM spans
),
pieces AS (
    -- a reading's part of each minute its span reaches; at 1 Hz almost every span ends in its own
    -- minute: a list of one for those (the demo's 1 Hz day of 32 GPUs: +17% over the plain mean of
    -- each minute's readings, where a second pass over the readings for the later minutes was +33%)
    SELECT host, gpu_uuid, activity_ratio, minute_index,
           least(end_us, (minute_index + 1) * 60000000) - greatest(start_us, minute_index * 60000000) AS covered_us
    FROM (SELECT *, unnest(CASE WHEN last_minute = first_minute THEN [first_minute]
                                ELSE range(first_minute, last_minute + 1) END) AS minute_index
          FROM minute_spans)
)
SELECT host, gpu_uuid, to_timestamp(minute_index * 60) AS minute_at,
       sum(activity_ratio * covered_us) / sum(covered_us) AS activity_ratio,
       sum(covered_us) / 1e6 AS covered_s
FROM pieces
-- a span past midnight reaches into the next day, whose own readings say what it did
WHERE minute_index < epoch($day::DATE + 1) // 60
GROUP BY host, gpu_uuid, minute_index
