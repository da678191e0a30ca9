-- lake_hosts: the hosts with gpu_samples files in the partitions a build of $day reads (its own
-- date= folder and its neighbours', whose readings near midnight it pairs with the day's).
-- Not a warehouse relation: read by warehouse.host_batches from the file listing alone.
-- parameters: $dates [DATE[]] the day and its neighbours
-- columns: host [text]
-- A folder name is decoded as DuckDB's Hive partitioning decodes it, so the batch's hosts match the
-- rows' `host` (host=fd00%3A%3A7 is host 'fd00::7'); an empty host= folder and Hive's NULL folder
-- are '' (the build takes their rows as host '' and quarantines them, key_missing). Before, such
-- folders' rows matched no batch and were lost without a word.
SELECT DISTINCT CASE WHEN folder = '__HIVE_DEFAULT_PARTITION__' THEN '' ELSE url_decode(folder) END AS host
FROM (SELECT regexp_extract(file, '/host=([^/]*)/', 1) AS folder
      FROM glob([getvariable('jh_lake') || '/gpu_samples/date=' || strftime(d, '%Y-%m-%d') || '/*/*.parquet'
                 FOR d IN CAST($dates AS DATE[])]))
ORDER BY host
