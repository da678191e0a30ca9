-- file_columns: the schema elements of each of a list of Parquet files, in the footer's order (a
-- root, then depth first: num_children says how many elements below an element are its children).
-- Not a warehouse relation: read by warehouse.lake_contract to check the files a build reads.
-- parameters: $files [text[]] paths or URLs
-- columns: file_name [text], name [text], type [text] Parquet physical type (NULL: a group: the
--   root, a list or a struct), num_children [count], converted_type [text], logical_type [text]
SELECT file_name, name, type, coalesce(num_children, 0) AS num_children, converted_type, logical_type
FROM parquet_schema(CAST($files AS VARCHAR[]))
