-- readings_prune: forget the readings of the days up to $cutoff (never $day, the one being built),
-- under warehouse.readings_retention_days.
-- parameters: $cutoff [DATE], $day [DATE]
-- columns: path [text] each file no longer listed, n_rows [count] the readings it holds
DELETE FROM stg_gpu_samples_files WHERE day <= $cutoff::DATE AND day <> $day::DATE RETURNING path, n_rows
