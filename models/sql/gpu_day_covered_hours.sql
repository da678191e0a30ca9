-- gpu_day_covered_hours: the hours each GPU's readings of a day cover, of which its busy hours are
-- a share (recommend_gpu_profile's and placement_gpu_day's busy_hours: the one rule for both).
-- Grain: day, gpu_uuid of gpu_activity_samples (models.activity.create_activity_view) with power.
-- Input besides: `covered_hours_input_coverage` (temp view: day, gpu_uuid, covered_s [s] from
--   fct_gpu_coverage_daily, empty without it); models.recommend_inputs.create_covered_hours_view
--   makes both.
-- Columns: day, gpu_uuid; span_hours [h] from the first reading with power to the last;
--   covered_hours [h] span_hours, or the seconds the warehouse's energy covered where
--   fct_gpu_coverage_daily says fewer. By the span alone a GPU read 00:00-01:00 and 23:00-24:00
--   was busy 15.5 h where its readings held 1.3 h: the recommender promised 12x the kWh/day they
--   support, and thermal placement counted its 2 h of work as 24 h. A covered_s of 0 (energy from
--   no interval: readings further apart than the warehouse bridges) says nothing of how long the
--   GPU ran, and a missing row nothing at all: the span stands.
WITH span AS (
    SELECT day, gpu_uuid, (epoch(max(sampled_at)) - epoch(min(sampled_at))) / 3600.0 AS span_hours
    FROM gpu_activity_samples
    WHERE power_w IS NOT NULL
    GROUP BY day, gpu_uuid
)
SELECT s.day, s.gpu_uuid, s.span_hours,
       least(s.span_hours, nullif(c.covered_s, 0) / 3600.0) AS covered_hours
FROM span AS s
LEFT JOIN covered_hours_input_coverage AS c USING (day, gpu_uuid)
