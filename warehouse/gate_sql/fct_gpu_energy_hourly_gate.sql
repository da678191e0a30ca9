-- fct_gpu_energy_hourly_gate: the blocking rules on one day of fct_gpu_energy_hourly, counted.
-- Not a warehouse relation (no `kind:`): read by warehouse.gate only.
-- grain: one row for the day
-- parameters: $day [DATE] the day checked; $max_energy_kwh [kWh] the most one GPU can draw in an
--   hour (warehouse.max_power_abs_w / 1000)
-- columns:
--   n_rows [count] GPU-hours of the day
--   duplicate_key_rows [count] rows whose (hour_at, gpu_uuid) another row has too (every copy)
--   hour_outside_day_rows [count] rows whose hour_at does not start within the day
--   energy_out_of_range_rows [count] rows with energy_kwh outside [0, $max_energy_kwh]
--   coverage_out_of_range_rows [count] rows with coverage_ratio outside [0, 1]
--   unknown_source_rows [count] rows with energy_source not 'counter' or 'power_integral'
--   *_examples [list] up to 3 offending values of each rule
-- A NULL value breaks no rule (as a Great Expectations column rule skips NULLs).
WITH day_rows AS (
    SELECT
        hour_at, gpu_uuid, energy_kwh, coverage_ratio, energy_source,
        hour_at >= $day::TIMESTAMPTZ AND hour_at < ($day::DATE + 1)::TIMESTAMPTZ AS hour_in_day,
        count(*) OVER (PARTITION BY hour_at, gpu_uuid) AS key_rows
    FROM fct_gpu_energy_hourly
    WHERE day = $day::DATE
)
SELECT
    count(*) AS n_rows,
    count(*) FILTER (WHERE key_rows > 1 AND (hour_at IS NOT NULL OR gpu_uuid IS NOT NULL)) AS duplicate_key_rows,
    list(gpu_uuid || ' at ' || hour_at::VARCHAR ORDER BY hour_at, gpu_uuid)
        FILTER (WHERE key_rows > 1 AND (hour_at IS NOT NULL OR gpu_uuid IS NOT NULL))[1:3] AS duplicate_key_examples,
    count(*) FILTER (WHERE NOT hour_in_day) AS hour_outside_day_rows,
    list(hour_at::VARCHAR ORDER BY hour_at) FILTER (WHERE NOT hour_in_day)[1:3] AS hour_outside_day_examples,
    count(*) FILTER (WHERE energy_kwh < 0 OR energy_kwh > $max_energy_kwh) AS energy_out_of_range_rows,
    list(energy_kwh ORDER BY energy_kwh) FILTER (WHERE energy_kwh < 0 OR energy_kwh > $max_energy_kwh)[1:3]
        AS energy_out_of_range_examples,
    count(*) FILTER (WHERE coverage_ratio < 0 OR coverage_ratio > 1.0 + 1e-9) AS coverage_out_of_range_rows,
    list(coverage_ratio ORDER BY coverage_ratio) FILTER (WHERE coverage_ratio < 0 OR coverage_ratio > 1.0 + 1e-9)[1:3]
        AS coverage_out_of_range_examples,
    count(*) FILTER (WHERE energy_source NOT IN ('counter', 'power_integral')) AS unknown_source_rows,
    list(DISTINCT energy_source) FILTER (WHERE energy_source NOT IN ('counter', 'power_integral'))[1:3]
        AS unknown_source_examples
FROM day_rows
