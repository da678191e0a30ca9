-- lake_fingerprint: per dataset and date= folder, what a list of lake files is: how many, their
-- bytes, and a hash over each one's (path under the lake, size, modification time). A listing and
-- each file's size and time only (read_blob without its content): no file is opened.
-- Not a warehouse relation: read by warehouse.lake_fingerprint, for a build (what it read) and for
-- the gate (what the lake holds now); the two compare equal when no file came, went or changed.
-- parameters: $lake [text] the lake's root; $files [text[]] the files; $datasets [text[]],
--   $dates [DATE[]] every (dataset, date) to describe (a row with 0 files where none is listed);
--   $window_start_at, $window_end_at [TIMESTAMPTZ] the window the neighbouring days' files were
--   chosen by (warehouse.lake_fingerprint.files_read), kept beside the fingerprint
-- columns: dataset [text], partition_date [DATE], n_files [count], size_bytes [bytes],
--   files_md5 [text] md5 of the sorted lines "<path under the lake> <size> <mtime, us since epoch>"
--   (the md5 of the empty text when there is no file), last_modified_at [TIMESTAMPTZ, UTC] newest mtime,
--   window_start_at, window_end_at [TIMESTAMPTZ, UTC] as bound
WITH files AS (
    SELECT CASE WHEN starts_with(filename, $lake || '/') THEN substr(filename, length($lake) + 2) ELSE filename END
               AS path,
           size AS size_bytes,
           last_modified AS modified_at
    FROM read_blob(CAST($files AS VARCHAR[]))
),
placed AS (
    SELECT *,
           split_part(path, '/', 1) AS dataset,
           TRY_CAST(regexp_extract(path, '/date=([^/]*)/', 1) AS DATE) AS partition_date
    FROM files
),
wanted AS (
    SELECT d.dataset, p.partition_date
    FROM unnest(CAST($datasets AS VARCHAR[])) AS d(dataset)
    CROSS JOIN unnest(CAST($dates AS DATE[])) AS p(partition_date)
)
SELECT w.dataset,
       w.partition_date,
       count(f.path) AS n_files,
       coalesce(sum(f.size_bytes), 0)::BIGINT AS size_bytes,
       md5(coalesce(string_agg(f.path || ' ' || f.size_bytes || ' ' || epoch_us(f.modified_at), chr(10)
                               ORDER BY f.path), '')) AS files_md5,
       max(f.modified_at) AS last_modified_at,
       $window_start_at::TIMESTAMPTZ AS window_start_at,
       $window_end_at::TIMESTAMPTZ AS window_end_at
FROM wanted AS w
LEFT JOIN placed AS f USING (dataset, partition_date)
GROUP BY w.dataset, w.partition_date
ORDER BY w.dataset, w.partition_date
