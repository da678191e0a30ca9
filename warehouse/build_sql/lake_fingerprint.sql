-- lake_fingerprint: per dataset and date= folder, what a list of lake files holds, in terms that a
-- compaction (the same rows rewritten into one file per host) leaves as they are: the readings of
-- the day's own folder (from the footers), and the hosts whose files reach into the day from a
-- neighbouring folder. Also the files themselves (count, bytes, a hash over each one's path, size
-- and modification time), to say what changed; no file is opened but through its footer.
-- Not a warehouse relation: read by warehouse.lake_fingerprint, for a build (what it read) and for
-- the gate (what the lake holds now); the two compare equal when no reading came or went.
-- parameters: $lake [text] the lake's root; $day [DATE] the day built; $files [text[]] the files;
--   $counted_files [text[]], $counted_rows [BIGINT[]] each file's rows by its footer (NULL: not
--   readable); $datasets [text[]], $dates [DATE[]] every (dataset, date) to describe (a row with 0
--   files where none is listed); $window_start_at, $window_end_at [TIMESTAMPTZ] the window the
--   neighbouring days' files were chosen by (warehouse.lake_fingerprint.files_read), kept beside it
-- columns: dataset [text], partition_date [DATE], n_files [count], size_bytes [bytes],
--   files_md5 [text] md5 of the sorted lines "<path under the lake> <size> <mtime, us since epoch>"
--   (the md5 of the empty text when there is no file), last_modified_at [TIMESTAMPTZ, UTC] newest mtime,
--   n_rows [count] the day's own folder: its files' rows (NULL: a footer could not be read; NULL for
--   a neighbouring folder), hosts [text] the hosts of the files, sorted, comma-separated ('' none;
--   "<host> (a file unreadable)" for a host with a file whose footer cannot be read),
--   files [list of {path, size_bytes, modified_at}] the files themselves, by path,
--   window_start_at, window_end_at [TIMESTAMPTZ, UTC] as bound
WITH files AS (
    SELECT filename AS full_path,
           CASE WHEN starts_with(filename, $lake || '/') THEN substr(filename, length($lake) + 2) ELSE filename END
               AS path,
           size AS size_bytes,
           last_modified AS modified_at
    FROM read_blob(CAST($files AS VARCHAR[]))
),
counted AS (
    SELECT unnest(CAST($counted_files AS VARCHAR[])) AS full_path, unnest(CAST($counted_rows AS BIGINT[])) AS n_rows
),
placed AS (
    SELECT f.*,
           c.n_rows,
           split_part(f.path, '/', 1) AS dataset,
           TRY_CAST(regexp_extract(f.path, '/date=([^/]*)/', 1) AS DATE) AS partition_date,
           regexp_extract(f.path, '/host=([^/]*)/', 1) AS host
    FROM files AS f
    LEFT JOIN counted AS c USING (full_path)
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
       CASE WHEN w.partition_date = $day::DATE AND count(f.path) = count(f.n_rows)
            THEN coalesce(sum(f.n_rows), 0) END::BIGINT AS n_rows,
       -- a file whose footer cannot be read may hold anything: its host is named apart
       coalesce(string_agg(DISTINCT f.host || CASE WHEN f.n_rows IS NULL THEN ' (a file unreadable)' ELSE '' END, ','
                           ORDER BY f.host || CASE WHEN f.n_rows IS NULL THEN ' (a file unreadable)' ELSE '' END), '') AS hosts,
       coalesce(list({'path': f.path, 'size_bytes': f.size_bytes, 'modified_at': f.modified_at} ORDER BY f.path)
                    FILTER (WHERE f.path IS NOT NULL), []) AS files,
       $window_start_at::TIMESTAMPTZ AS window_start_at,
       $window_end_at::TIMESTAMPTZ AS window_end_at
FROM wanted AS w
LEFT JOIN placed AS f USING (dataset, partition_date)
GROUP BY w.dataset, w.partition_date
ORDER BY w.dataset, w.partition_date
