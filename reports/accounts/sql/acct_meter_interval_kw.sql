-- acct_meter_interval_kw: each site's facility meter power per demand interval of one day (the
-- 15- or 30-minute intervals a utility bills demand on: reports/accounts/demand.py).
-- Grain: one row per (site, interval_at) the meter covered any of.
-- Parameters: $day (DATE, UTC), $interval_s (BIGINT: the interval, a divisor of 3600),
-- $max_meter_gap_s ([warehouse] max_meter_gap_s, the build's).
-- interval_at TIMESTAMPTZ (UTC start of the interval), hour_at TIMESTAMPTZ (UTC start of its hour),
-- site, facility_kw [kW] the meter's average power over the covered part of the interval,
-- coverage_ratio [0..1] the share of the interval covered.
-- The rule is fct_pue_hourly's (warehouse/sql/fct_pue_hourly.sql), buckets of $interval_s in place
-- of hours: the same readings (one per site and instant, both meters present, finite, >= 0), the
-- same trapezoid over intervals up to $max_meter_gap_s, the same exact sums. So at 3600 s it gives
-- fct_pue_hourly's facility_energy_kwh / coverage_ratio (tests/reports/accounts/test_demand_interval.py
-- holds the two to it); a change to either rule belongs in both.
WITH readings AS (
    SELECT
        site, epoch_us(sampled_at) AS t_us,
        facility_power_w::DOUBLE AS facility_power_w, it_power_w::DOUBLE AS it_power_w
    FROM raw_facility_samples
    WHERE date BETWEEN $day::DATE - 1 AND $day::DATE + 1
      AND sampled_at BETWEEN $day::TIMESTAMPTZ - to_seconds($max_meter_gap_s)
                         AND ($day::DATE + 1)::TIMESTAMPTZ + to_seconds($max_meter_gap_s)
      AND facility_power_w >= 0 AND it_power_w >= 0
      AND isfinite(facility_power_w) AND isfinite(it_power_w)
    QUALIFY row_number() OVER (PARTITION BY site, sampled_at ORDER BY source, facility_power_w, it_power_w) = 1
),
intervals AS (
    SELECT
        site,
        lag(t_us) OVER w AS t0_us, t_us AS t1_us,
        lag(facility_power_w) OVER w AS f0_w, facility_power_w AS f1_w
    FROM readings
    WINDOW w AS (PARTITION BY site ORDER BY t_us)
),
bridged AS (
    SELECT *, t0_us // ($interval_s::BIGINT * 1000000) AS first_bucket,
           (t1_us - 1) // ($interval_s::BIGINT * 1000000) AS last_bucket
    FROM intervals
    WHERE t0_us IS NOT NULL AND (t1_us - t0_us) / 1e6 <= $max_meter_gap_s
),
bucket_spans AS (
    SELECT *, unnest(range(first_bucket, last_bucket + 1)) AS bucket_index FROM bridged
),
pieces AS (
    SELECT
        *,
        greatest(t0_us, bucket_index * $interval_s::BIGINT * 1000000) AS a_us,
        least(t1_us, (bucket_index + 1) * $interval_s::BIGINT * 1000000) AS b_us,
        ((greatest(t0_us, bucket_index * $interval_s::BIGINT * 1000000) - t0_us)
         + (least(t1_us, (bucket_index + 1) * $interval_s::BIGINT * 1000000) - t0_us)) / (t1_us - t0_us) AS mid_fraction_x2
    FROM bucket_spans
    WHERE bucket_index >= epoch($day::TIMESTAMPTZ)::BIGINT // $interval_s
      AND bucket_index < epoch(($day::DATE + 1)::TIMESTAMPTZ)::BIGINT // $interval_s
),
site_buckets AS (
    SELECT
        site, bucket_index,
        sum(((2 * f0_w + (f1_w - f0_w) * mid_fraction_x2) / 2 * (b_us - a_us) / 1e6)::DECIMAL(38, 6))::DOUBLE
            AS facility_j,
        sum(b_us - a_us) / 1e6 AS covered_s
    FROM pieces
    GROUP BY ALL
)
SELECT
    to_timestamp(bucket_index * $interval_s) AS interval_at,
    to_timestamp(bucket_index * $interval_s // 3600 * 3600) AS hour_at,
    site,
    CASE WHEN covered_s > 0 THEN facility_j / 1000 / covered_s END AS facility_kw,
    covered_s / $interval_s AS coverage_ratio
FROM site_buckets
ORDER BY site, interval_at
