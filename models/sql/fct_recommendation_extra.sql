-- fct_recommendation_extra: recommendations beyond power caps, with their expected saving.
-- kind: day
-- grain: one row per (day, kind, gpu_uuid)
-- Written by models.placement.recommend_placement (delete-then-insert for the day).
-- columns:
--   day [DATE] UTC day
--   kind [text] 'consolidation': free this GPU, its light work shares the host's other mostly idle
--     GPUs | 'thermal_placement': give this GPU other work, hotter jobs to better-cooled slots
--   host [text] server the GPU sits in
--   gpu_uuid [text] GPU
--   detail [text] what to do and why
--   expected_saving_kwh_per_day [kWh/day] expected saving (consolidation: only the idle power something
--     parks, `[placement] parking`)
--   latency_risk [text] consolidation: 'low' | 'medium' | 'high' (models.placement.latency_risk); NULL otherwise
--   saturated_minutes_ratio [0..1] consolidation: share of the minutes every light GPU of the host was
--     read in which the packed work would queue
CREATE TABLE IF NOT EXISTS fct_recommendation_extra (
    day DATE NOT NULL,
    kind VARCHAR NOT NULL,
    host VARCHAR NOT NULL,
    gpu_uuid VARCHAR NOT NULL,
    detail VARCHAR,
    expected_saving_kwh_per_day DOUBLE,
    latency_risk VARCHAR,
    saturated_minutes_ratio DOUBLE
)
