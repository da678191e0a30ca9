-- readings_files: every file stg_gpu_samples reads, in day order.
-- columns: path [text]
SELECT path FROM stg_gpu_samples_files ORDER BY day, path
