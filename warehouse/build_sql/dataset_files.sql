-- dataset_files: every Parquet file of one lake dataset, in every date= partition.
-- Not a warehouse relation: read by warehouse.lake_contract (a listing, no file is opened).
-- parameters: $dataset [text] a dataset of collectors/schema.py
-- columns: file [text] path or URL of the file
SELECT file
FROM glob(getvariable('jh_lake') || '/' || $dataset || '/date=*/*/*.parquet')
ORDER BY file
