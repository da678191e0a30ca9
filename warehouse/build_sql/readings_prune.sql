-- readings_prune: forget the readings of the days up to $cutoff (never $day, the one being built),
-- under warehouse.readings_retention_days; returns the readings forgotten.
-- parameters: $cutoff [DATE], $day [DATE]
-- columns: n_rows [count]
WITH pruned AS (
    DELETE FROM stg_gpu_samples_files WHERE day <= $cutoff::DATE AND day <> $day::DATE RETURNING n_rows
)
SELECT coalesce(sum(n_rows), 0)::BIGINT AS n_rows FROM pruned
