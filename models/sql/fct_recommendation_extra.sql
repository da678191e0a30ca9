-- fct_recommendation_extra: recommendations beyond power caps, with their expected saving (delete-then-insert per day).
-- Grain: day x kind x gpu_uuid.
-- Columns: day (DATE); kind ('consolidation': free this GPU, its light work shares the host's other
--   mostly idle GPUs | 'thermal_placement': give this GPU other work, hotter jobs to better-cooled
--   slots); host, gpu_uuid [text]; detail [text] what to do and why; expected_saving_kwh_per_day [kWh/day]
CREATE TABLE IF NOT EXISTS fct_recommendation_extra (
    day DATE NOT NULL,
    kind VARCHAR NOT NULL,
    host VARCHAR NOT NULL,
    gpu_uuid VARCHAR NOT NULL,
    detail VARCHAR,
    expected_saving_kwh_per_day DOUBLE
)
