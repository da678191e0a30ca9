-- covered_hours: the hours a GPU's readings of a day cover, of which its busy hours are a share
-- (recommend_gpu_profile's and placement_gpu_day's busy_hours: the one rule for both, each computed
-- in its own aggregate of the day's readings; a view of its own read them a second time: +15% of
-- recommend_day on a 64-GPU day). By the span from the first reading to the last, a GPU read
-- 00:00-01:00 and 23:00-24:00 was busy 15.5 h where its readings held 1.3 h: the recommender
-- promised 12x the kWh/day they support, and thermal placement counted its 2 h of work as 24 h.
-- A scalar macro (models.recommend_inputs.create_covered_hours_inputs creates it, with the temp
-- view covered_hours_input_coverage: day, gpu_uuid, covered_s from fct_gpu_coverage_daily, empty
-- without it; for Spark, warehouse/spark_dialect.py inlines it at each call).
-- Arguments: first_at, last_at [TIMESTAMPTZ] the GPU's first and last reading with power that day;
--   covered_s [s] the seconds the warehouse's energy covered (fct_gpu_coverage_daily).
-- Returns [h]: the span, or covered_s where it says fewer. A covered_s of 0 (energy from no
--   interval: readings further apart than the warehouse bridges) says nothing of how long the GPU
--   ran, and a missing one nothing at all: the span stands.
CREATE OR REPLACE TEMP MACRO covered_hours(first_at, last_at, covered_s) AS (
    least((epoch(last_at) - epoch(first_at)) / 3600.0, nullif(covered_s, 0) / 3600.0)
);
