-- file_time_range_read: the first and last time one lake file holds, read from its rows: for a
-- file whose footer has no statistics of its time column (Spark's INT96 timestamps, a writer with
-- statistics off), which file_time_ranges cannot place. Not a warehouse relation: read by
-- warehouse.lake_fingerprint.
-- parameters: $file [text] path or URL; $time_column [text] the dataset's time column
--   (collectors.schema.TIME_COLUMN)
-- columns: first_at, last_at [TIMESTAMPTZ, UTC] NULL for a file without rows
SELECT min(COLUMNS(lambda c: c = $time_column))::TIMESTAMPTZ AS first_at,
       max(COLUMNS(lambda c: c = $time_column))::TIMESTAMPTZ AS last_at
FROM read_parquet($file)
