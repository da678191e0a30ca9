-- lake_fingerprint_built: what the build of one day recorded of the lake files it read.
-- Not a warehouse relation: read by warehouse.lake_fingerprint to compare with the lake now.
-- parameters: $day [DATE]
-- columns: those of fct_warehouse_build_lake_files
SELECT * FROM fct_warehouse_build_lake_files WHERE day = $day::DATE ORDER BY dataset, partition_date
