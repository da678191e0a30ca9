-- readings_files_table: the Parquet files that hold stg_gpu_samples, one row per file of a built
-- day (warehouse/readings.py). The view stg_gpu_samples reads exactly these files; a rebuild of a
-- day replaces its rows here in the build's transaction, so a reader sees the old day's files or
-- the new day's, never a mix.
-- columns:
--   day [DATE] the built day the file holds readings of
--   path [text] absolute path of the file
--   n_rows [count] readings in the file
--   written_at [TIMESTAMPTZ, UTC] when the build wrote it
CREATE TABLE IF NOT EXISTS stg_gpu_samples_files (
    day DATE NOT NULL,
    path VARCHAR NOT NULL,
    n_rows BIGINT NOT NULL,
    written_at TIMESTAMPTZ NOT NULL
)
