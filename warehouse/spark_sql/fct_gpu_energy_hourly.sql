-- fct_gpu_energy_hourly (Spark SQL): warehouse/sql/fct_gpu_energy_hourly.sql on Apache Spark,
-- for one day. Same method (counter, power trapezoid, reset value; one source per GPU-hour, never
-- a sum); see that file for the rules and the choice of the winning source.
-- grain: one row per (hour_index, gpu_uuid)
-- input: temp view int_gpu_samples_checked (spark_sql/int_gpu_samples_checked.sql)
-- parameters: :day DATE; :first_hour, :end_hour BIGINT (hours since epoch of the day's first hour
--   and of the next day's); :max_gap_s, :max_counter_gap_s, :max_power_over_limit_ratio,
--   :max_power_abs_w DOUBLE
-- columns:
--   hour_index [hours since 1970-01-01 UTC] start of the hour (hour_at = hour_index x 3600 s)
--   day [DATE], host, gpu_uuid, gpu_model [text]
--   energy_kwh [kWh] measured over the covered part of the hour (NULL when none covered)
--   avg_power_w [W] energy over covered time
--   coverage_ratio [0..1] share of the hour covered by bridged intervals
--   energy_source [text] 'counter' | 'power_integral'; source [text]; n_samples, n_sources [count]
-- Dialect notes: integer division is `div`; DuckDB's unnest(range()) is explode(sequence()).
WITH readings AS (
    SELECT host, gpu_uuid, source, gpu_model, power_limit_w, t_us,
           CAST(power_w AS DOUBLE) AS power_w, energy_mj_total
    FROM int_gpu_samples_checked
    WHERE reason IS NULL AND (power_w IS NOT NULL OR energy_mj_total IS NOT NULL)
),
intervals AS (
    SELECT
        host, gpu_uuid, source,
        lag(t_us) OVER w AS t0_us,
        t_us AS t1_us,
        lag(power_w) OVER w AS p0_w,
        power_w AS p1_w,
        lag(energy_mj_total) OVER w AS c0_mj,
        energy_mj_total AS c1_mj,
        greatest(power_limit_w, lag(power_limit_w) OVER w) AS limit_w
    FROM readings
    WINDOW w AS (PARTITION BY host, gpu_uuid, source ORDER BY t_us)
),
bounded AS (
    SELECT
        *,
        (t1_us - t0_us) / 1e6 AS dt_s,
        (CASE WHEN limit_w > 0 THEN :max_power_over_limit_ratio * limit_w ELSE :max_power_abs_w END)
            * (t1_us - t0_us) / 1e6 AS max_plausible_j
    FROM intervals
    WHERE t0_us IS NOT NULL AND t1_us > t0_us
),
classified AS (
    SELECT
        *,
        CASE
            WHEN c0_mj IS NOT NULL AND c1_mj IS NOT NULL AND dt_s <= :max_counter_gap_s
                 AND c1_mj >= c0_mj AND (c1_mj - c0_mj) / 1e3 <= max_plausible_j THEN 'counter'
            WHEN p0_w IS NOT NULL AND p1_w IS NOT NULL AND dt_s <= :max_gap_s THEN 'power'
            WHEN c0_mj IS NOT NULL AND c1_mj IS NOT NULL AND dt_s <= :max_counter_gap_s
                 AND c1_mj < c0_mj AND c1_mj / 1e3 <= max_plausible_j THEN 'reset_value'
        END AS method
    FROM bounded
),
bridged AS (
    SELECT
        *,
        t0_us div 3600000000 AS first_hour,
        (t1_us - 1) div 3600000000 AS last_hour,
        CASE method
            WHEN 'counter' THEN (c1_mj - c0_mj) / 1e3
            WHEN 'reset_value' THEN c1_mj / 1e3
        END AS counted_j
    FROM classified
    WHERE method IS NOT NULL
),
hour_spans AS (
    SELECT *, first_hour AS hour_index FROM bridged WHERE first_hour = last_hour
    UNION ALL
    SELECT *, explode(sequence(first_hour, last_hour)) AS hour_index FROM bridged WHERE first_hour < last_hour
),
pieces AS (
    SELECT
        *,
        greatest(t0_us, hour_index * 3600000000) AS a_us,
        least(t1_us, (hour_index + 1) * 3600000000) AS b_us
    FROM hour_spans
    WHERE hour_index >= :first_hour AND hour_index < :end_hour
),
piece_energy AS (
    SELECT
        host, gpu_uuid, source, hour_index, method,
        b_us - a_us AS covered_us,
        CASE
            WHEN method = 'power' THEN
                (2 * p0_w + (p1_w - p0_w) * ((a_us - t0_us) + (b_us - t0_us)) / (t1_us - t0_us))
                / 2 * (b_us - a_us) / 1e6
            ELSE counted_j * (b_us - a_us) / (t1_us - t0_us)
        END AS energy_j
    FROM pieces
),
stream_hours AS (
    SELECT
        host, gpu_uuid, source, hour_index,
        -- exact sums, as in the DuckDB file: the result does not depend on the order of addition
        CAST(sum(CAST(energy_j AS DECIMAL(38, 6))) AS DOUBLE) AS energy_j,
        sum(covered_us) / 1e6 AS covered_s,
        sum(CASE WHEN method <> 'power' THEN covered_us ELSE 0 END) / 1e6 AS counter_s
    FROM piece_energy
    GROUP BY host, gpu_uuid, source, hour_index
),
stream_samples AS (
    SELECT host, gpu_uuid, source,
           t_us div 3600000000 AS hour_index,
           count(*) AS n_samples
    FROM int_gpu_samples_checked
    WHERE reason IS NULL AND day = :day
    GROUP BY host, gpu_uuid, source, t_us div 3600000000
),
models AS (
    SELECT gpu_uuid, max(gpu_model) AS gpu_model
    FROM int_gpu_samples_checked
    WHERE reason IS NULL
    GROUP BY gpu_uuid
),
stream_summary AS (
    SELECT
        coalesce(h.host, s.host) AS host,
        coalesce(h.gpu_uuid, s.gpu_uuid) AS gpu_uuid,
        coalesce(h.source, s.source) AS source,
        coalesce(h.hour_index, s.hour_index) AS hour_index,
        h.energy_j,
        coalesce(h.covered_s, 0) AS covered_s,
        coalesce(h.counter_s, 0) AS counter_s,
        coalesce(s.n_samples, 0) AS n_samples
    FROM stream_hours AS h
    FULL OUTER JOIN stream_samples AS s
      ON h.host = s.host AND h.gpu_uuid = s.gpu_uuid AND h.source = s.source AND h.hour_index = s.hour_index
),
winner AS (
    SELECT
        *,
        count(*) OVER (PARTITION BY gpu_uuid, hour_index) AS n_sources,
        row_number() OVER (
            PARTITION BY gpu_uuid, hour_index
            ORDER BY covered_s >= 0.95 * 3600 DESC, counter_s * 2 > covered_s DESC,
                     n_samples DESC, covered_s DESC, source
        ) AS source_rank
    FROM stream_summary
)
SELECT
    w.hour_index,
    :day AS day,
    w.host,
    w.gpu_uuid,
    m.gpu_model,
    CASE WHEN w.covered_s > 0 THEN w.energy_j / 3.6e6 END AS energy_kwh,
    CASE WHEN w.covered_s > 0 THEN w.energy_j / w.covered_s END AS avg_power_w,
    w.covered_s / 3600 AS coverage_ratio,
    CASE
        WHEN w.covered_s = 0 THEN NULL
        WHEN w.counter_s * 2 > w.covered_s THEN 'counter'
        ELSE 'power_integral'
    END AS energy_source,
    w.source,
    w.n_samples,
    w.n_sources
FROM winner AS w
LEFT JOIN models AS m ON m.gpu_uuid = w.gpu_uuid
WHERE w.source_rank = 1
