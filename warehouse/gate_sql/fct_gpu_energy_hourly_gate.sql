-- fct_gpu_energy_hourly_gate: the blocking rules on one day of fct_gpu_energy_hourly, counted.
-- Not a warehouse relation (no `kind:`): read by warehouse.gate only.
-- grain: one row for the day
-- parameters: $day [DATE] the day checked; $max_energy_kwh [kWh] the most a GPU whose limit is
--   unknown can draw in an hour (warehouse.max_power_abs_w / 1000); $max_power_over_limit_ratio
--   [ratio] a GPU with a limit draws at most this times its highest limit of the day read in
--   stg_gpu_samples (the build's own bound on every reading and counter interval)
-- columns:
--   n_rows [count] GPU-hours of the day
--   measured_rows [count] GPU-hours with energy_kwh measured (not NULL): a day of rows and no energy
--     (no power and no counter anywhere, or readings too far apart to bridge) passed every rule
--   duplicate_key_rows [count] rows whose (hour_at, gpu_uuid) another row has too (every copy)
--   hour_outside_day_rows [count] rows whose hour_at does not start within the day
--   energy_out_of_range_rows [count] rows with energy_kwh outside [0, the GPU's most in an hour]
--     (with one bound for every GPU, 3.6 kWh passed on a GPU limited to 700 W)
--   incomplete_rows [count] rows with hour_at, gpu_uuid or coverage_ratio NULL, or covered
--     (coverage_ratio > 0) with energy_kwh or energy_source NULL: a covered hour has its energy
--   coverage_out_of_range_rows [count] rows with coverage_ratio outside [0, 1]
--   unknown_source_rows [count] rows with energy_source not 'counter' or 'power_integral'
--   *_examples [list] up to 3 offending values of each rule
-- Apart from incomplete_rows, a NULL value breaks no rule (as a Great Expectations column rule
-- skips NULLs).
WITH limits AS (
    SELECT gpu_uuid, max(power_limit_w) FILTER (WHERE power_limit_w > 0) AS max_limit_w
    FROM stg_gpu_samples
    WHERE day = $day::DATE
    GROUP BY gpu_uuid
),
day_rows AS (
    SELECT
        e.hour_at, e.gpu_uuid, e.energy_kwh, e.coverage_ratio, e.energy_source,
        e.hour_at >= $day::TIMESTAMPTZ AND e.hour_at < ($day::DATE + 1)::TIMESTAMPTZ AS hour_in_day,
        count(*) OVER (PARTITION BY e.hour_at, e.gpu_uuid) AS key_rows,
        coalesce($max_power_over_limit_ratio * l.max_limit_w / 1000.0, $max_energy_kwh) AS most_kwh
    FROM fct_gpu_energy_hourly AS e
    LEFT JOIN limits AS l USING (gpu_uuid)
    WHERE e.day = $day::DATE
)
SELECT
    count(*) AS n_rows,
    count(energy_kwh) AS measured_rows,
    count(*) FILTER (WHERE key_rows > 1 AND (hour_at IS NOT NULL OR gpu_uuid IS NOT NULL)) AS duplicate_key_rows,
    list(gpu_uuid || ' at ' || hour_at::VARCHAR ORDER BY hour_at, gpu_uuid)
        FILTER (WHERE key_rows > 1 AND (hour_at IS NOT NULL OR gpu_uuid IS NOT NULL))[1:3] AS duplicate_key_examples,
    count(*) FILTER (WHERE NOT hour_in_day) AS hour_outside_day_rows,
    list(hour_at::VARCHAR ORDER BY hour_at) FILTER (WHERE NOT hour_in_day)[1:3] AS hour_outside_day_examples,
    -- NaN is above every number in DuckDB: a NaN energy is out of range too
    count(*) FILTER (WHERE energy_kwh < 0 OR energy_kwh > most_kwh) AS energy_out_of_range_rows,
    list(gpu_uuid || ': ' || energy_kwh::VARCHAR || ' kWh of at most ' || round(most_kwh, 3)::VARCHAR
         ORDER BY energy_kwh DESC) FILTER (WHERE energy_kwh < 0 OR energy_kwh > most_kwh)[1:3]
        AS energy_out_of_range_examples,
    count(*) FILTER (WHERE hour_at IS NULL OR gpu_uuid IS NULL OR coverage_ratio IS NULL
                       OR (coverage_ratio > 0 AND (energy_kwh IS NULL OR energy_source IS NULL))) AS incomplete_rows,
    list(coalesce(gpu_uuid, 'NULL') || ' at ' || coalesce(hour_at::VARCHAR, 'NULL') ORDER BY hour_at, gpu_uuid)
        FILTER (WHERE hour_at IS NULL OR gpu_uuid IS NULL OR coverage_ratio IS NULL
                  OR (coverage_ratio > 0 AND (energy_kwh IS NULL OR energy_source IS NULL)))[1:3] AS incomplete_examples,
    count(*) FILTER (WHERE coverage_ratio < 0 OR coverage_ratio > 1.0 + 1e-9) AS coverage_out_of_range_rows,
    list(coverage_ratio ORDER BY coverage_ratio) FILTER (WHERE coverage_ratio < 0 OR coverage_ratio > 1.0 + 1e-9)[1:3]
        AS coverage_out_of_range_examples,
    count(*) FILTER (WHERE energy_source NOT IN ('counter', 'power_integral')) AS unknown_source_rows,
    list(DISTINCT energy_source) FILTER (WHERE energy_source NOT IN ('counter', 'power_integral'))[1:3]
        AS unknown_source_examples
FROM day_rows
