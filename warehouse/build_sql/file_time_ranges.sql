-- file_time_ranges: the first and last time each lake file holds, and its rows, from its Parquet
-- footer (no row is read). Not a warehouse relation: read by warehouse.lake_fingerprint to tell
-- which of a neighbouring day's files reach into the day built, and how many readings a day's own
-- folder holds.
-- parameters: $files [text[]] paths or URLs (at least one); $time_columns [MAP(text, text)] dataset ->
--   its time column (collectors.schema.TIME_COLUMN); a file's dataset is the folder above date=
-- columns: file [text]; first_at, last_at [TIMESTAMPTZ, UTC] NULL where a row group has no
--   statistics for the column, or the file has no such column (then nothing is known of its times);
--   n_rows [count] its rows (NULL: it has no such column)
WITH stats AS (
    SELECT file_name AS file,
           TRY_CAST(stats_min_value AS TIMESTAMPTZ) AS first_at,
           TRY_CAST(stats_max_value AS TIMESTAMPTZ) AS last_at,
           row_group_num_rows
    FROM parquet_metadata(CAST($files AS VARCHAR[]))
    WHERE path_in_schema = element_at(CAST($time_columns AS MAP(VARCHAR, VARCHAR)),
                                      regexp_extract(file_name, '([^/]+)/date=[^/]*/[^/]*/[^/]*$', 1))[1]
)
SELECT f.file,
       -- one row group without statistics leaves the whole file's range unknown
       CASE WHEN count(*) = count(s.first_at) THEN min(s.first_at) END AS first_at,
       CASE WHEN count(*) = count(s.last_at) THEN max(s.last_at) END AS last_at,
       sum(s.row_group_num_rows)::BIGINT AS n_rows
FROM unnest(CAST($files AS VARCHAR[])) AS f(file)
LEFT JOIN stats AS s USING (file)
GROUP BY f.file
