-- jh_lake_{dataset}: a dataset's files read by the lake contract (warehouse/lake_contract.py fills
-- in the dataset's name from collectors/schema.py). The typed, empty {contract_view} gives every
-- documented column its type even when no file has it; union_by_name reads files that lack
-- optional columns (NULL) or carry extra ones. The variable jh_build_files_{dataset} narrows it to
-- the files a build reads (union_by_name opens every footer at each query); NULL: the whole lake.
-- The lake is the connection's jh_lake, else {lake_fallback}: the lake the view was made from, so a
-- plain `duckdb` session that sets no variable reads the same files (warehouse/db.py sets jh_lake).
-- The files' SELECT casts the contract's timestamp columns to TIMESTAMPTZ (lake_contract.py), so a
-- file in nanoseconds or without a time zone (pandas, Spark) unites with the writer's.
SELECT * FROM {contract_view}
UNION ALL BY NAME
SELECT *{timestamp_casts} FROM read_parquet(
    coalesce(getvariable('jh_build_files_{dataset}'),
             [coalesce(getvariable('jh_lake'), {lake_fallback}) || '/{dataset}/**/*.parquet']),
    hive_partitioning = true, union_by_name = true
)
