-- day_files: the Parquet files of one lake dataset in the date= partitions a build reads.
-- Not a warehouse relation: read by warehouse.lake_contract (a listing, no file is opened).
-- parameters: $dataset [text] a dataset of collectors/schema.py, $dates [DATE[]]
-- columns: file [text] path or URL of the file
SELECT file
FROM glob([getvariable('jh_lake') || '/' || $dataset || '/date=' || strftime(d, '%Y-%m-%d') || '/*/*.parquet'
           FOR d IN CAST($dates AS DATE[])])
ORDER BY file
