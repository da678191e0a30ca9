-- fct_warehouse_build_lake_files: what each day's build read from the lake, per dataset and date=
-- folder: the day's own files, and the neighbouring days' files whose readings reach across
-- midnight into the day. The gate of a later day lists the lake again and compares (severity
-- 'rebuild' in fct_check_results) the own folder's readings, the hosts reaching in from a
-- neighbouring one, and the files. A change of files is excused only where the partition's
-- compaction ledger says the files read were merged into those there now and that nothing merged
-- in with them could reach the day (none from its own folder, none with readings in the window,
-- none of times the ledger does not say: warehouse/lake_fingerprint.py). A change says that the
-- day's facts stand on the lake as it was, and that a re-run of that day takes the change in.
-- kind: day
-- grain: one row per (day built, dataset, date= folder read: the day before, the day, the day after)
-- columns:
--   day [DATE] UTC day built
--   build_id [UUID] fct_warehouse_build_daily.build_id of the build that read them
--   dataset [text] lake dataset (collectors/schema.py)
--   partition_date [DATE] the date= folder
--   n_files [count] Parquet files read from it (0: none was there)
--   size_bytes [bytes] their total size
--   files_md5 [text] md5 of the sorted lines "<path under the lake> <size> <mtime, us since epoch>"
--   last_modified_at [TIMESTAMPTZ, UTC] the newest file's modification time (NULL: no file)
--   n_rows [count] the day's own folder: the readings of its files, by their footers (NULL for a
--     neighbouring folder)
--   hosts [text] the hosts of the files read from the folder, sorted, comma-separated ('' none)
--   files [list of {path [text] under the lake, size_bytes [bytes], modified_at [TIMESTAMPTZ, UTC]}]
--     the files read from the folder
--   window_start_at [TIMESTAMPTZ, UTC] a neighbouring day's file counts when its footer's time range
--     reaches into [window_start_at, window_end_at] (the day and the margin its energy bridges
--     across midnight), or when its footer does not say; the day's own files all count
--   window_end_at [TIMESTAMPTZ, UTC] the end of that window
SELECT
    $day::DATE AS day,
    b.build_id,
    f.dataset,
    f.partition_date,
    f.n_files,
    f.size_bytes,
    f.files_md5,
    f.last_modified_at,
    f.n_rows,
    f.hosts,
    f.files,
    f.window_start_at,
    f.window_end_at
FROM jh_build_lake_fingerprint AS f
CROSS JOIN (SELECT build_id FROM fct_warehouse_build_daily WHERE day = $day::DATE) AS b
