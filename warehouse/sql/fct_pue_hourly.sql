-- fct_pue_hourly: facility and IT energy of each site in each UTC hour, and their ratio (PUE).
-- kind: day
-- grain: one row per (hour_at, site)
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   site [text] site name
--   pue [ratio] facility_energy_kwh / it_energy_kwh over the same covered intervals; not clamped: below 1
--     (a feed the facility meter does not see) or absurd (an IT meter in kW) is kept as measured, and
--     the accounts take default_pue for such an hour (reports/accounts/sql/acct_pue_hours.sql)
--   it_energy_kwh [kWh] trapezoid of it_power_w over the covered part of the hour
--   facility_energy_kwh [kWh] trapezoid of facility_power_w over the covered part of the hour
--   coverage_ratio [0..1] share of the hour covered by intervals <= max_meter_gap_s with both readings
--   n_samples [count] readings in the hour
-- Only intervals where both meters read at both ends count, so the ratio compares like with like.
-- $meter_bucket_s is 3600 in this table (hours); the demand charge (reports/accounts/demand.py) reads the
-- same rule per demand interval (900: quarter-hours, each row then one quarter-hour), so that the
-- bill's peak and the hour's energy come from one integration of the meter.
WITH readings AS (
    SELECT
        site, epoch_us(sampled_at) AS t_us,
        facility_power_w::DOUBLE AS facility_power_w, it_power_w::DOUBLE AS it_power_w
    FROM raw_facility_samples
    WHERE date BETWEEN $day::DATE - 1 AND $day::DATE + 1
      AND sampled_at BETWEEN $day::TIMESTAMPTZ - to_seconds($margin_s)
                         AND ($day::DATE + 1)::TIMESTAMPTZ + to_seconds($margin_s)
      AND facility_power_w >= 0 AND it_power_w >= 0
      AND isfinite(facility_power_w) AND isfinite(it_power_w)
    -- of copies at one instant, the lowest source name, then the lowest powers: the same pick on a rebuild
    QUALIFY row_number() OVER (PARTITION BY site, sampled_at ORDER BY source, facility_power_w, it_power_w) = 1
),
intervals AS (
    SELECT
        site,
        lag(t_us) OVER w AS t0_us, t_us AS t1_us,
        lag(facility_power_w) OVER w AS f0_w, facility_power_w AS f1_w,
        lag(it_power_w) OVER w AS i0_w, it_power_w AS i1_w
    FROM readings
    WINDOW w AS (PARTITION BY site ORDER BY t_us)
),
bridged AS (
    SELECT
        *,
        t0_us // ($meter_bucket_s::BIGINT * 1000000) AS first_bucket,
        (t1_us - 1) // ($meter_bucket_s::BIGINT * 1000000) AS last_bucket
    FROM intervals
    WHERE t0_us IS NOT NULL AND (t1_us - t0_us) / 1e6 <= $max_meter_gap_s
),
bucket_spans AS (
    SELECT *, unnest(range(first_bucket, last_bucket + 1)) AS bucket_index FROM bridged
),
pieces AS (
    SELECT
        *,
        greatest(t0_us, bucket_index * ($meter_bucket_s::BIGINT * 1000000)) AS a_us,
        least(t1_us, (bucket_index + 1) * ($meter_bucket_s::BIGINT * 1000000)) AS b_us,
        ((greatest(t0_us, bucket_index * ($meter_bucket_s::BIGINT * 1000000)) - t0_us)
         + (least(t1_us, (bucket_index + 1) * ($meter_bucket_s::BIGINT * 1000000)) - t0_us))
            / (t1_us - t0_us) AS mid_fraction_x2
    FROM bucket_spans
    WHERE bucket_index >= epoch($day::TIMESTAMPTZ)::BIGINT // $meter_bucket_s
      AND bucket_index < epoch(($day::DATE + 1)::TIMESTAMPTZ)::BIGINT // $meter_bucket_s
),
site_buckets AS (
    SELECT
        site, bucket_index,
        -- exact sums (micro-joules as DECIMAL, whole microseconds): the same bits on a re-run;
        -- 38 digits: a meter misread in mW on a 10 MW site still fits (18 would stop the build)
        sum(((2 * f0_w + (f1_w - f0_w) * mid_fraction_x2) / 2 * (b_us - a_us) / 1e6)::DECIMAL(38, 6))::DOUBLE
            AS facility_j,
        sum(((2 * i0_w + (i1_w - i0_w) * mid_fraction_x2) / 2 * (b_us - a_us) / 1e6)::DECIMAL(38, 6))::DOUBLE
            AS it_j,
        sum(b_us - a_us) / 1e6 AS covered_s
    FROM pieces
    GROUP BY ALL
),
site_samples AS (
    SELECT site, t_us // ($meter_bucket_s::BIGINT * 1000000) AS bucket_index, count(*) AS n_samples
    FROM readings
    WHERE t_us >= epoch_us($day::TIMESTAMPTZ) AND t_us < epoch_us(($day::DATE + 1)::TIMESTAMPTZ)
    GROUP BY ALL
)
SELECT
    to_timestamp(bucket_index * $meter_bucket_s) AS hour_at,
    $day::DATE AS day,
    site,
    CASE WHEN it_j > 0 THEN facility_j / it_j END AS pue,
    CASE WHEN covered_s > 0 THEN it_j / 3.6e6 END AS it_energy_kwh,
    CASE WHEN covered_s > 0 THEN facility_j / 3.6e6 END AS facility_energy_kwh,
    coalesce(covered_s, 0) / $meter_bucket_s AS coverage_ratio,
    coalesce(n_samples, 0) AS n_samples
FROM site_buckets
FULL OUTER JOIN site_samples USING (site, bucket_index)
