-- fct_node_energy_hourly: energy of each server in each UTC hour, from its BMC (IPMI DCMI power,
-- else the SDR power sensor).
-- kind: day
-- grain: one row per (hour_at, host)
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   host [text] server
--   energy_kwh [kWh] trapezoid of power over the covered part of the hour (NULL when none covered)
--   avg_power_w [W] energy over covered time
--   coverage_ratio [0..1] share of the hour covered by intervals <= max_meter_gap_s between readings
--   n_samples [count] readings in the hour of the source the hour was taken from
-- A reading's power is its DCMI power_w, else its sdr_power_w (a BMC without DCMI: the collector
-- records its SDR power sensor there); readings with neither, or a negative or non-finite one,
-- are skipped. Each (host, source) is integrated apart, and the hour is taken from one source: the
-- one that covered more of it, then more readings, then the lowest name. Interleaved, two
-- sources' readings blended into a figure neither read (1.05 kWh for 1.00 and 1.10). Several
-- readings of one source at the same instant count once: the lowest power, as on the GPU side
-- (quarantine_meter_samples lists the others), so a rebuild gives the same bits.
WITH readings AS (
    SELECT host, source, epoch_us(sampled_at) AS t_us, power_w
    FROM (
        SELECT host, coalesce(source, '') AS source, sampled_at,
               coalesce(power_w, sdr_power_w)::DOUBLE AS power_w
        FROM raw_node_samples
        WHERE date BETWEEN $day::DATE - 1 AND $day::DATE + 1
          AND sampled_at BETWEEN $day::TIMESTAMPTZ - to_seconds($margin_s)
                             AND ($day::DATE + 1)::TIMESTAMPTZ + to_seconds($margin_s)
    )
    WHERE power_w >= 0 AND isfinite(power_w)
    QUALIFY row_number() OVER (PARTITION BY host, source, sampled_at ORDER BY power_w) = 1
),
intervals AS (
    SELECT
        host, source,
        lag(t_us) OVER w AS t0_us, t_us AS t1_us,
        lag(power_w) OVER w AS p0_w, power_w AS p1_w
    FROM readings
    WINDOW w AS (PARTITION BY host, source ORDER BY t_us)
),
bridged AS (
    SELECT *, t0_us // 3600000000 AS first_hour, (t1_us - 1) // 3600000000 AS last_hour
    FROM intervals
    WHERE t0_us IS NOT NULL AND (t1_us - t0_us) / 1e6 <= $max_meter_gap_s
),
hour_spans AS (
    SELECT *, unnest(range(first_hour, last_hour + 1)) AS hour_index FROM bridged
),
pieces AS (
    SELECT
        *,
        greatest(t0_us, hour_index * 3600000000) AS a_us,
        least(t1_us, (hour_index + 1) * 3600000000) AS b_us
    FROM hour_spans
    WHERE hour_index >= epoch($day::TIMESTAMPTZ)::BIGINT // 3600
      AND hour_index < epoch(($day::DATE + 1)::TIMESTAMPTZ)::BIGINT // 3600
),
source_hours AS (
    SELECT
        host, source, hour_index,
        -- exact sums (micro-joules as DECIMAL, whole microseconds): the same bits on a re-run;
        -- 38 digits: a meter misread in mW on a 10 MW site still fits (18 would stop the build)
        sum(((2 * p0_w + (p1_w - p0_w) * ((a_us - t0_us) + (b_us - t0_us)) / (t1_us - t0_us))
            / 2 * (b_us - a_us) / 1e6)::DECIMAL(38, 6))::DOUBLE AS energy_j,
        sum(b_us - a_us) / 1e6 AS covered_s
    FROM pieces
    GROUP BY ALL
),
source_samples AS (
    SELECT host, source, t_us // 3600000000 AS hour_index, count(*) AS n_samples
    FROM readings
    WHERE t_us >= epoch_us($day::TIMESTAMPTZ) AND t_us < epoch_us(($day::DATE + 1)::TIMESTAMPTZ)
    GROUP BY ALL
),
host_hours AS (
    -- one source per host-hour: the one that covered more of it, then more readings, then the name
    SELECT * EXCLUDE (source)
    FROM source_hours
    FULL OUTER JOIN source_samples USING (host, source, hour_index)
    QUALIFY row_number() OVER (PARTITION BY host, hour_index
                               ORDER BY coalesce(covered_s, 0) DESC, coalesce(n_samples, 0) DESC, source) = 1
)
SELECT
    to_timestamp(hour_index * 3600) AS hour_at,
    $day::DATE AS day,
    host,
    CASE WHEN coalesce(covered_s, 0) > 0 THEN energy_j / 3.6e6 END AS energy_kwh,
    CASE WHEN coalesce(covered_s, 0) > 0 THEN energy_j / covered_s END AS avg_power_w,
    coalesce(covered_s, 0) / 3600 AS coverage_ratio,
    coalesce(n_samples, 0) AS n_samples
FROM host_hours
