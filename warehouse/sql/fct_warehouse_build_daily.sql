-- fct_warehouse_build_daily: when each day was last built, and what the build kept.
-- kind: day
-- grain: one row per day built (replaced by every build of that day)
-- columns:
--   day [DATE] UTC day built
--   build_id [UUID] new at every build: a table computed from this day's rows (the power fit's
--     stored sums) stores it, and is recomputed when it no longer matches
--   built_at [TIMESTAMPTZ, UTC] when the build's transaction began
--   reference_at [TIMESTAMPTZ, UTC] the build's "now" for the future-timestamp rule
--   n_clean_gpu_samples [count] rows of stg_gpu_samples for the day
--   n_quarantined_gpu_samples [count] rows of quarantine_gpu_samples for the day
--   n_raw_gpu_samples [count] rows of the day's own date= folder of gpu_samples in the files the build
--     read (fct_warehouse_build_lake_files): the blocking gate's nothing-lost rule compares the
--     clean and quarantined rows with this, not with the lake at gate time, where a file shipped
--     since the build had failed a whole day (a later file is the 'rebuild' check's). NULL: built
--     before it was recorded (the gate then counts the lake)
--   readings_pruned_at [TIMESTAMPTZ, UTC] when the day's stg_gpu_samples rows were deleted by a later
--     build (warehouse.readings_retention_days); NULL while they are kept. The day's other rows
--     stay; a rebuild of the day reads its readings from the lake again
--   completed_at [TIMESTAMPTZ, UTC] when the daily run of this build finished its last step (the
--     report); NULL while its later steps (checks, fits, accounts, recommendations, export) are
--     still to run, or when one failed. Each step publishes whole, but until then the day's energy
--     is this build's while its fits and recommendations may be an earlier build's, or missing:
--     join on `completed_at IS NOT NULL` to read whole days only
SELECT
    $day::DATE AS day,
    gen_random_uuid() AS build_id,
    now() AS built_at,
    $now::TIMESTAMPTZ AS reference_at,
    (SELECT count(*) FROM stg_gpu_samples WHERE day = $day::DATE) AS n_clean_gpu_samples,
    (SELECT count(*) FROM quarantine_gpu_samples WHERE day = $day::DATE) AS n_quarantined_gpu_samples,
    -- raw_gpu_samples reads the build's own list of files here (lake_contract.narrowed)
    (SELECT count(*) FROM raw_gpu_samples WHERE date = $day::DATE) AS n_raw_gpu_samples,
    CAST(NULL AS TIMESTAMPTZ) AS readings_pruned_at,
    CAST(NULL AS TIMESTAMPTZ) AS completed_at
