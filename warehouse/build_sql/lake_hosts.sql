-- lake_hosts: the hosts with gpu_samples files in the partitions a build of $day reads (its own
-- date= folder and its neighbours', whose readings near midnight it pairs with the day's).
-- Not a warehouse relation: read by warehouse.host_batches from the file listing alone.
-- parameters: $dates [DATE[]] the day and its neighbours
-- columns: host [text]
SELECT DISTINCT regexp_extract(file, '/host=([^/]+)/', 1) AS host
FROM glob([getvariable('jh_lake') || '/gpu_samples/date=' || strftime(d, '%Y-%m-%d') || '/*/*.parquet'
           FOR d IN CAST($dates AS DATE[])])
ORDER BY host
