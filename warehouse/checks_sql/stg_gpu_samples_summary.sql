-- stg_gpu_samples_summary: the row-level rules on one day of stg_gpu_samples (millions of rows),
-- counted in DuckDB so that Great Expectations validates one small row instead of the relation.
-- Not a warehouse relation (no `kind:`): read by warehouse.checks only.
-- grain: one row for the day
-- parameters: $day [DATE] the day checked; $built_raw_rows [count] the rows of the day's date= folder
--   the build read (fct_warehouse_build_daily.n_raw_gpu_samples; warehouse.gate.counting_raw_rows),
--   NULL for a day built before it was recorded: the lake's date= folder is then counted now
-- columns:
--   n_rows [count] clean rows of the day
--   gpu_uuid_null_rows [count] rows with gpu_uuid NULL
--   sampled_at_null_rows [count] rows with sampled_at NULL
--   duplicate_key_rows [count] rows whose (gpu_uuid, sampled_at, source) another row of the day has
--     too (every copy counted, as Great Expectations' compound-unique rule does; rows whose three
--     key columns are all NULL are left out, as it does)
--   power_w_rows [count] rows with a power_w reading
--   power_w_negative_rows [count] rows with power_w < 0
--   power_w_min [W] lowest power_w, to the mW (NULL when none)
--   no_energy_reading_rows [count] rows with neither power_w nor energy_mj_total (the lake contract
--     wants one of them: a counter-only lake warned every day that all its power_w were NULL)
--   no_energy_reading_share [0..1] no_energy_reading_rows / n_rows (0 when there are no rows)
--   not_in_inventory_rows [count] rows with in_inventory = false
--   raw_rows [count] rows of the day's date= partition in the files the build read: a file shipped
--     since is no reading lost (the gate's 'rebuild' check names it); NULL $built_raw_rows: the lake's now
--   raw_rows_counted [text] where raw_rows were counted, in words (the build's files or the lake now)
--   quarantined_rows [count] rows of the day in quarantine_gpu_samples
--   clean_plus_quarantined_rows [count] n_rows + quarantined_rows (must equal raw_rows)
--   stray_files [count] Parquet files under the day's date= folder that are not one folder below
--     it (date=D/x.parquet, date=D/host=X/sub/x.parquet): no build reads them, so raw_rows cannot
--     count them either, and their readings were lost without a word (must be 0)
--   stray_file_example [text] the first of them by name (NULL when none)
-- Duplicates without a second pass over every key: per (gpu_uuid, source), one bit per second of
-- the day is set; when a group has as many rows as set bits, its sampled_at are all distinct
-- seconds, so its keys are unique. Only groups where that fails (two readings in one second, a
-- reading outside the day, a NULL time) get the exact GROUP BY over their full keys.
WITH day_rows AS (
    SELECT gpu_uuid, sampled_at, source, power_w, energy_mj_total, in_inventory
    FROM stg_gpu_samples
    WHERE day = $day::DATE
),
per_group AS (
    SELECT
        gpu_uuid,
        source,
        count(*) AS n_rows,
        bitstring_agg((epoch_us(sampled_at) - epoch_us($day::TIMESTAMPTZ)) // 1000000, 0, 86399)
            FILTER (WHERE sampled_at >= $day::TIMESTAMPTZ AND sampled_at < ($day::DATE + 1)::TIMESTAMPTZ)
            AS seconds_seen,
        count(*) FILTER (WHERE sampled_at IS NULL) AS sampled_at_null_rows,
        count(power_w) AS power_w_rows,
        count(*) FILTER (WHERE power_w IS NULL AND energy_mj_total IS NULL) AS no_energy_reading_rows,
        count(*) FILTER (WHERE power_w < 0) AS power_w_negative_rows,
        min(power_w) AS power_w_min,
        count(*) FILTER (WHERE NOT in_inventory) AS not_in_inventory_rows
    FROM day_rows
    GROUP BY gpu_uuid, source
),
suspect_groups AS (
    SELECT gpu_uuid, source
    FROM per_group
    WHERE n_rows > coalesce(bit_count(seconds_seen), 0)
),
duplicate_keys AS (
    -- stg_gpu_samples again, not day_rows: a CTE read twice is materialised (all the day's rows
    -- in memory), while a second scan that the empty semi join cuts short costs nothing
    SELECT count(*) AS copies
    FROM stg_gpu_samples AS d
    SEMI JOIN suspect_groups AS s
        ON d.gpu_uuid IS NOT DISTINCT FROM s.gpu_uuid AND d.source IS NOT DISTINCT FROM s.source
    WHERE d.day = $day::DATE
      AND NOT (d.gpu_uuid IS NULL AND d.sampled_at IS NULL AND d.source IS NULL)
    GROUP BY d.gpu_uuid, d.sampled_at, d.source
    HAVING count(*) > 1
),
totals AS (
    SELECT
        coalesce(sum(n_rows), 0)::BIGINT AS n_rows,
        coalesce(sum(n_rows) FILTER (WHERE gpu_uuid IS NULL), 0)::BIGINT AS gpu_uuid_null_rows,
        coalesce(sum(sampled_at_null_rows), 0)::BIGINT AS sampled_at_null_rows,
        coalesce(sum(power_w_rows), 0)::BIGINT AS power_w_rows,
        coalesce(sum(no_energy_reading_rows), 0)::BIGINT AS no_energy_reading_rows,
        coalesce(sum(power_w_negative_rows), 0)::BIGINT AS power_w_negative_rows,
        min(power_w_min) AS power_w_min,
        coalesce(sum(not_in_inventory_rows), 0)::BIGINT AS not_in_inventory_rows
    FROM per_group
),
lake AS (
    -- with $built_raw_rows, raw_gpu_samples reads an empty stand-in (no lake file is opened)
    SELECT coalesce($built_raw_rows::BIGINT, count(*)) AS raw_rows,
           CASE WHEN $built_raw_rows IS NULL THEN 'in the lake''s date= partition now'
                ELSE 'read by the build from the lake''s date= partition' END AS raw_rows_counted
    FROM raw_gpu_samples WHERE date = $day::DATE
),
quarantine AS (
    SELECT count(*) AS quarantined_rows FROM quarantine_gpu_samples WHERE day = $day::DATE
),
stray AS (
    -- a listing, no file opened: every Parquet file under the day's folder, less the shape the build
    -- reads; a session without a lake (readings handed in as a table) lists a path that cannot exist
    SELECT count(*) AS stray_files, min(file) AS stray_file_example
    FROM glob(coalesce(getvariable('jh_lake'), '/dev/null/no-lake') || '/gpu_samples/date=' || strftime($day::DATE, '%Y-%m-%d') || '/**/*.parquet')
    WHERE NOT regexp_matches(file, '/date=[^/]+/[^/]+/[^/]+[.]parquet$')
)
SELECT
    t.n_rows,
    t.gpu_uuid_null_rows,
    t.sampled_at_null_rows,
    (SELECT coalesce(sum(copies), 0) FROM duplicate_keys)::BIGINT AS duplicate_key_rows,
    t.power_w_rows,
    t.power_w_negative_rows,
    -- the lake stores power_w as FLOAT: as a DOUBLE, 48.046 W read 48.04600143432617 W in the report
    round(t.power_w_min::DOUBLE, 3) AS power_w_min,
    t.no_energy_reading_rows,
    CASE WHEN t.n_rows > 0 THEN t.no_energy_reading_rows / t.n_rows ELSE 0 END AS no_energy_reading_share,
    t.not_in_inventory_rows,
    l.raw_rows,
    l.raw_rows_counted,
    q.quarantined_rows,
    t.n_rows + q.quarantined_rows AS clean_plus_quarantined_rows,
    s.stray_files,
    s.stray_file_example
FROM totals AS t, lake AS l, quarantine AS q, stray AS s
