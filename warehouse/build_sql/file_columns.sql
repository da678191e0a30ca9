-- file_columns: the column names of each of a list of Parquet files (from their footers).
-- Not a warehouse relation: read by warehouse.lake_contract to check the files a build reads.
-- parameters: $files [text[]] paths or URLs
-- columns: file_name [text], columns [text[]]
SELECT file_name, list(name) AS columns
FROM parquet_schema(CAST($files AS VARCHAR[]))
GROUP BY file_name
