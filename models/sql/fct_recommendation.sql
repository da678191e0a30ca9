-- fct_recommendation: one recommended setting per GPU per day (delete-then-insert for the day).
-- Grain: day x gpu_uuid.
-- Columns: day (DATE), host, gpu_uuid, gpu_model, workload_class (latency-sensitive | throughput |
--   background), power_limit_w (W; NULL when the GPU is skipped), default_limit_w (W),
--   locked_sm_clock_min_mhz, locked_sm_clock_max_mhz (MHz; set when a clock range is suggested
--   instead of a cap), expected_saving_pct (% of the GPU's busy energy), expected_energy_saving_kwh_per_day
--   (kWh/day), expected_slowdown_pct (%), reason (why this setting, or why none).
CREATE TABLE IF NOT EXISTS fct_recommendation (
    day DATE NOT NULL,
    host VARCHAR NOT NULL,
    gpu_uuid VARCHAR NOT NULL,
    gpu_model VARCHAR,
    workload_class VARCHAR,
    power_limit_w DOUBLE,
    default_limit_w DOUBLE,
    locked_sm_clock_min_mhz DOUBLE,
    locked_sm_clock_max_mhz DOUBLE,
    expected_saving_pct DOUBLE,
    expected_energy_saving_kwh_per_day DOUBLE,
    expected_slowdown_pct DOUBLE,
    reason VARCHAR
)
