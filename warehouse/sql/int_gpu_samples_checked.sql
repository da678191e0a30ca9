-- int_gpu_samples_checked: the GPU readings of the day being built plus a margin on each side,
-- each with the first quarantine rule it breaks (NULL when clean). Internal, rebuilt per build.
-- kind: temp
-- grain: one row per raw GPU reading in [day - margin, day + 1 + margin] of the hosts in $hosts
--   (the build's current batch of hosts: see warehouse/host_batches.py)
-- columns: the lake's gpu_samples columns, plus
--   day [DATE] the date= partition the row was read from (UTC day of sampled_at)
--   in_inventory [bool] the GPU's uuid is in the site inventory (dim_gpu)
--   next_sampled_at [TIMESTAMPTZ, UTC], next_power_w [W], next_energy_mj_total [mJ], next_power_limit_w [W]:
--     the next energy reading (clean, power or counter present) of the same (host, gpu_uuid,
--     source) stream; NULL on rows that are not energy readings and on a stream's last one. The
--     one sort of the build: the hourly energy pairs readings with these, the fit reads stg's
--     interval_s from them, so neither sorts the day again.
--   reason [text] why the row is quarantined (NULL: clean). Rules, first match wins:
--     key_missing: sampled_at, gpu_uuid or source NULL, or host NULL or empty (a file another tool
--       wrote; an empty host= folder or Hive's NULL one, which name the rows' host): the reading
--       belongs to no stream and no hour; kept clean, one such row made an hour_at NULL GPU-hour
--       and the blocking gate then stopped the whole day;
--     duplicate_key: a second row with the same (gpu_uuid, sampled_at, source); of the copies a
--       valid one is kept, then one with both power and counter (a copy without the counter would
--       leave the counter's interval a hole), then the lowest power, so a reading is never lost to
--       its invalid or emptier copy; then the lowest of each other documented column, so re-runs keep
--       the same copy whatever order the files are read in;
--     future_timestamp: sampled_at later than build time + max_clock_skew_s;
--     outside_partition_day: sampled_at not on the UTC day of its date= folder (another tool's
--       file that starts before midnight, or one filed under the wrong day): kept, it made GPU-hours
--       outside the day, which stopped the day at the gate without naming the file, or NULL-energy
--       hours; our writer files every reading under its own day;
--     power_not_finite; limit_not_finite: power_limit_w NaN or infinite (every bound below and the
--       energy's plausible maximum compare with it, and NaN passes them all); counter_not_finite:
--       energy_mj_total NaN or infinite (a float counter, as pandas writes one with gaps: kept, it
--       cut the counter's intervals on both sides); power_negative; counter_negative;
--     power_unit_mw: power_w > 100x the power limit (or 10x the absolute bound): mW stored as W;
--     power_over_limit: power_w > max_power_over_limit_ratio x power_limit_w;
--     power_over_bound: no limit known and power_w > max_power_abs_w;
--     temp_out_of_range: temp_c or mem_temp_c outside [min_temp_c, max_temp_c];
--     ratio_out_of_range: an *_ratio column outside 0..1;
--     util_out_of_range: util_gpu_pct or util_mem_pct outside 0..100;
--     clock_out_of_range: sm_clock_mhz outside [0, max_sm_clock_mhz] or mem_clock_mhz outside
--       [0, max_mem_clock_mhz] (a sentinel clock would be the model's f_max_mhz).
WITH window_rows AS NOT MATERIALIZED (
    -- the day's own files, then only the neighbours' readings near midnight: apart, the time
    -- range is a filter inside the neighbours' Parquet scan instead of one over all their rows.
    -- NOT MATERIALIZED: with three readers (the per-stream seconds, the duplicate keys, the rules)
    -- DuckDB would first copy every wide row into a temporary result; scanned three times, each
    -- reader decodes only its columns (3.6 -> 2.2 s per batch of 3.1 M readings, SCALING.md).
    -- The device's own limits are one value per GPU: fct_gpu_coverage_daily reads them on their own
    -- (carried through the pairing's sort with every reading, +3% of the build)
    SELECT r.* EXCLUDE (date, power_limit_default_w, power_limit_min_w, power_limit_max_w), r.date AS day
    FROM raw_gpu_samples AS r
    WHERE r.date = $day::DATE AND list_contains($hosts::VARCHAR[], coalesce(r.host, ''))
    UNION ALL
    SELECT r.* EXCLUDE (date, power_limit_default_w, power_limit_min_w, power_limit_max_w), r.date AS day
    FROM raw_gpu_samples AS r
    -- the typed partition column first: DuckDB opens only the neighbouring days' files
    WHERE (r.date = $day::DATE - 1 OR r.date = $day::DATE + 1)
      AND list_contains($hosts::VARCHAR[], coalesce(r.host, ''))
      AND r.sampled_at BETWEEN $day::TIMESTAMPTZ - to_seconds($margin_s)
                           AND ($day::DATE + 1)::TIMESTAMPTZ + to_seconds($margin_s)
),
per_stream AS (
    -- Duplicates without a hash of every key: per (gpu_uuid, source) one bit per second of the
    -- window is set; when a group has as many rows as set bits its times are distinct seconds, so
    -- its keys are unique. Only the other groups (two readings in one second, as at 10 Hz; a time
    -- outside the window or NULL) are grouped by their full keys below.
    SELECT
        gpu_uuid, source, count(*) AS n_rows,
        bitstring_agg(epoch_us(sampled_at) // 1000000 - epoch($day::TIMESTAMPTZ)::BIGINT + ceil($margin_s)::BIGINT,
                      0, 86400 + 2 * ceil($margin_s)::BIGINT)
            FILTER (WHERE sampled_at >= $day::TIMESTAMPTZ - to_seconds($margin_s)
                      AND sampled_at <= ($day::DATE + 1)::TIMESTAMPTZ + to_seconds($margin_s)) AS seconds_seen
    FROM window_rows
    GROUP BY gpu_uuid, source
),
suspect_streams AS (
    SELECT gpu_uuid, source FROM per_stream WHERE n_rows > coalesce(bit_count(seconds_seen), 0)
),
duplicate_keys AS (
    -- keys seen more than once: only their rows need ranking (a window over every row sorts them all)
    SELECT w.gpu_uuid, w.sampled_at, w.source
    FROM window_rows AS w
    SEMI JOIN suspect_streams AS s
        ON w.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid AND w.source IS NOT DISTINCT FROM s.source
    GROUP BY w.gpu_uuid, w.sampled_at, w.source
    HAVING count(*) > 1
),
finite AS (
    SELECT
        *,
        -- computed apart: inside the CASE below, DuckDB 2.0.1 let a NaN row fall through to a later rule
        coalesce(isfinite(power_w), true) AS power_finite,
        coalesce(isfinite(power_limit_w), true) AS limit_finite,
        coalesce(isfinite(CAST(energy_mj_total AS DOUBLE)), true) AS counter_finite
    FROM window_rows
),
ruled AS (
    -- every rule but duplicate_key, first: a duplicate is ranked by it, so a valid copy is kept
    SELECT
        * EXCLUDE (power_finite, limit_finite, counter_finite),
        CASE
            WHEN sampled_at IS NULL OR gpu_uuid IS NULL OR source IS NULL OR coalesce(host, '') = '' THEN 'key_missing'
            WHEN sampled_at > $now::TIMESTAMPTZ + to_seconds($max_clock_skew_s) THEN 'future_timestamp'
            WHEN sampled_at < day::TIMESTAMPTZ OR sampled_at >= (day + 1)::TIMESTAMPTZ THEN 'outside_partition_day'
            WHEN NOT power_finite THEN 'power_not_finite'
            WHEN NOT limit_finite THEN 'limit_not_finite'
            WHEN NOT counter_finite THEN 'counter_not_finite'
            WHEN power_w < 0 THEN 'power_negative'
            WHEN energy_mj_total < 0 THEN 'counter_negative'
            WHEN power_limit_w > 0 AND power_w > 100 * power_limit_w THEN 'power_unit_mw'
            WHEN coalesce(power_limit_w, 0) <= 0 AND power_w > 10 * $max_power_abs_w THEN 'power_unit_mw'
            WHEN power_limit_w > 0 AND power_w > $max_power_over_limit_ratio * power_limit_w THEN 'power_over_limit'
            WHEN coalesce(power_limit_w, 0) <= 0 AND power_w > $max_power_abs_w THEN 'power_over_bound'
            WHEN NOT coalesce(temp_c BETWEEN $min_temp_c AND $max_temp_c, true)
              OR NOT coalesce(mem_temp_c BETWEEN $min_temp_c AND $max_temp_c, true) THEN 'temp_out_of_range'
            WHEN NOT coalesce(sm_active_ratio BETWEEN 0 AND 1, true)
              OR NOT coalesce(sm_occupancy_ratio BETWEEN 0 AND 1, true)
              OR NOT coalesce(tensor_active_ratio BETWEEN 0 AND 1, true)
              OR NOT coalesce(dram_active_ratio BETWEEN 0 AND 1, true) THEN 'ratio_out_of_range'
            WHEN NOT coalesce(util_gpu_pct BETWEEN 0 AND 100, true)
              OR NOT coalesce(util_mem_pct BETWEEN 0 AND 100, true) THEN 'util_out_of_range'
            WHEN NOT coalesce(sm_clock_mhz BETWEEN 0 AND $max_sm_clock_mhz, true)
              OR NOT coalesce(mem_clock_mhz BETWEEN 0 AND $max_mem_clock_mhz, true) THEN 'clock_out_of_range'
        END AS rule_reason
    FROM finite
),
checked AS (
    SELECT r.* EXCLUDE (rule_reason), r.rule_reason AS reason
    FROM ruled AS r
    ANTI JOIN duplicate_keys AS k USING (gpu_uuid, sampled_at, source)
    UNION ALL
    -- of the copies of one key, a valid one first, then the one with more of power and counter
    -- (then the lowest power, the lowest counter): a duplicate is quarantined, never the reading
    -- it duplicates
    SELECT
        * EXCLUDE (rule_reason, duplicate_rank),
        CASE WHEN duplicate_rank > 1 THEN 'duplicate_key' ELSE rule_reason END AS reason
    FROM (
        SELECT
            r.*,
            row_number() OVER (
                PARTITION BY gpu_uuid, sampled_at, source
                -- then every other documented column: a total order, so that the copy kept is the
                -- same whatever order the files are read in (two copies alike but for temp_c kept
                -- one or the other from run to run, and compacted or not: theta 0.1024 / 0.1067)
                ORDER BY rule_reason IS NULL DESC,
                         (power_w IS NOT NULL)::INTEGER + (energy_mj_total IS NOT NULL)::INTEGER DESC,
                         power_w NULLS LAST, energy_mj_total NULLS LAST, host NULLS LAST, gpu_index NULLS LAST,
                         power_limit_w NULLS LAST, temp_c NULLS LAST, mem_temp_c NULLS LAST, sm_clock_mhz NULLS LAST,
                         mem_clock_mhz NULLS LAST, util_gpu_pct NULLS LAST, util_mem_pct NULLS LAST,
                         sm_active_ratio NULLS LAST, sm_occupancy_ratio NULLS LAST, tensor_active_ratio NULLS LAST,
                         dram_active_ratio NULLS LAST, pcie_tx_bytes_per_s NULLS LAST, pcie_rx_bytes_per_s NULLS LAST,
                         mem_used_mib NULLS LAST, pstate NULLS LAST, clock_event_reasons NULLS LAST,
                         gpu_model NULLS LAST, day NULLS LAST
            ) AS duplicate_rank
        FROM ruled AS r
        SEMI JOIN duplicate_keys AS k USING (gpu_uuid, sampled_at, source)
    )
),
flagged AS (
    SELECT
        checked.*,
        checked.gpu_uuid IN (SELECT gpu_uuid FROM int_inventory) AS in_inventory,
        reason IS NULL AND (power_w IS NOT NULL OR energy_mj_total IS NOT NULL) AS is_energy_reading
    FROM checked
),
paired AS (
    SELECT
        * EXCLUDE (is_energy_reading),
        CASE WHEN is_energy_reading THEN lead(sampled_at) OVER next_reading END AS next_sampled_at,
        CASE WHEN is_energy_reading THEN lead(power_w) OVER next_reading END AS next_power_w,
        CASE WHEN is_energy_reading THEN lead(energy_mj_total) OVER next_reading END AS next_energy_mj_total,
        CASE WHEN is_energy_reading THEN lead(power_limit_w) OVER next_reading END AS next_power_limit_w
    FROM flagged
    -- energy readings and the other rows in separate partitions: a quarantined or empty row
    -- never sits between two readings that belong together
    WINDOW next_reading AS (PARTITION BY host, gpu_uuid, source, is_energy_reading ORDER BY sampled_at)
)
SELECT * FROM paired
