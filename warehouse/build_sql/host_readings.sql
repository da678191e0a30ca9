-- host_readings: how many readings each host's gpu_samples files hold, from their Parquet footers
-- (no row is read). Not a warehouse relation: read by warehouse.host_batches to size the batches.
-- parameters: $files [text[]] the day's gpu_samples files (paths or URLs)
-- columns: host [text], n_readings [count]
-- hosts named as lake_hosts.sql names them (decoded; Hive's NULL folder and an empty one are '')
SELECT CASE WHEN folder = '__HIVE_DEFAULT_PARTITION__' THEN '' ELSE url_decode(folder) END AS host,
       sum(num_rows)::BIGINT AS n_readings
FROM (SELECT regexp_extract(file_name, '/host=([^/]*)/', 1) AS folder, num_rows
      FROM parquet_file_metadata(CAST($files AS VARCHAR[])))
GROUP BY ALL
ORDER BY host
