-- host_readings: how many readings each host's gpu_samples files hold, from their Parquet footers
-- (no row is read). Not a warehouse relation: read by warehouse.host_batches to size the batches.
-- parameters: $files [text[]] the day's gpu_samples files (paths or URLs)
-- columns: host [text], n_readings [count]
SELECT regexp_extract(file_name, '/host=([^/]+)/', 1) AS host, sum(num_rows)::BIGINT AS n_readings
FROM parquet_file_metadata(CAST($files AS VARCHAR[]))
GROUP BY ALL
ORDER BY host
