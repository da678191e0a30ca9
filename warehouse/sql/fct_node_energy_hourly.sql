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
--   n_samples [count] readings in the hour of the streams its minutes were taken from
-- A reading's power is its DCMI power_w; a BMC without DCMI (power_w NULL) has the SDR power
-- sensor in sdr_power_w, read as a stream of its own (source '<source>/sdr'): taken row by row,
-- a DCMI reading missed now and then was filled with another meter's value (0.95 kWh for 1.00).
-- Readings with no power, or a negative or non-finite one, are skipped. Each (host, stream) is
-- integrated apart, and each minute of a server is taken from one stream: the one that covered
-- more of it, then DCMI over SDR, then more readings, then the lowest name; the hour adds its
-- minutes. Interleaved, two sources' readings blended into a figure neither read (1.05 kWh for
-- 1.00 and 1.10); one per hour, a switch of source at 00:30 kept half the hour. Several readings
-- of one stream at the same instant count once: the lowest power, as on the GPU side
-- (quarantine_meter_samples lists the others), so a rebuild gives the same bits.
WITH readings AS (
    SELECT host, source, epoch_us(sampled_at) AS t_us, power_w
    FROM (
        SELECT host,
               CASE WHEN power_w IS NULL AND sdr_power_w IS NOT NULL THEN coalesce(source, '') || '/sdr'
                    ELSE coalesce(source, '') END AS source,
               sampled_at,
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
    SELECT *, t0_us // 60000000 AS first_minute, (t1_us - 1) // 60000000 AS last_minute
    FROM intervals
    WHERE t0_us IS NOT NULL AND (t1_us - t0_us) / 1e6 <= $max_meter_gap_s
),
minute_spans AS (
    SELECT *, unnest(range(first_minute, last_minute + 1)) AS minute_index FROM bridged
),
pieces AS (
    SELECT
        *,
        greatest(t0_us, minute_index * 60000000) AS a_us,
        least(t1_us, (minute_index + 1) * 60000000) AS b_us
    FROM minute_spans
    WHERE minute_index >= epoch($day::TIMESTAMPTZ)::BIGINT // 60
      AND minute_index < epoch(($day::DATE + 1)::TIMESTAMPTZ)::BIGINT // 60
),
stream_minutes AS (
    SELECT
        host, source, minute_index,
        -- exact sums (micro-joules as DECIMAL, whole microseconds): the same bits on a re-run;
        -- 38 digits: a meter misread in mW on a 10 MW site still fits (18 would stop the build)
        sum(((2 * p0_w + (p1_w - p0_w) * ((a_us - t0_us) + (b_us - t0_us)) / (t1_us - t0_us))
            / 2 * (b_us - a_us) / 1e6)::DECIMAL(38, 6)) AS energy_j_decimal,
        sum(b_us - a_us) AS covered_us
    FROM pieces
    GROUP BY ALL
),
stream_samples AS (
    SELECT host, source, t_us // 60000000 AS minute_index, count(*) AS n_samples
    FROM readings
    WHERE t_us >= epoch_us($day::TIMESTAMPTZ) AND t_us < epoch_us(($day::DATE + 1)::TIMESTAMPTZ)
    GROUP BY ALL
),
host_minutes AS (
    -- one stream per server-minute: more covered, then DCMI over SDR, then more readings, then the name
    SELECT * EXCLUDE (source)
    FROM stream_minutes
    FULL OUTER JOIN stream_samples USING (host, source, minute_index)
    QUALIFY row_number() OVER (PARTITION BY host, minute_index
                               ORDER BY coalesce(covered_us, 0) DESC, source LIKE '%/sdr',
                                        coalesce(n_samples, 0) DESC, source) = 1
),
host_hours AS (
    SELECT
        host, minute_index // 60 AS hour_index,
        sum(energy_j_decimal)::DOUBLE AS energy_j,
        coalesce(sum(covered_us), 0) / 1e6 AS covered_s,
        sum(coalesce(n_samples, 0))::BIGINT AS n_samples
    FROM host_minutes
    GROUP BY ALL
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
