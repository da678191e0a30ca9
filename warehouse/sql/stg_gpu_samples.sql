-- stg_gpu_samples: clean GPU readings, one day per build; bad rows are in quarantine_gpu_samples.
-- kind: day
-- grain: one row per (gpu_uuid, sampled_at, source) that passed every quarantine rule
-- The lake's columns carry their units in their names: power_w [W], energy_mj_total [mJ counter
--   since driver load], temp_c [degC], *_ratio [0..1], *_pct [0..100], *_mhz [MHz].
-- columns: the lake's gpu_samples columns, plus
--   day [DATE] UTC day of sampled_at
--   in_inventory [bool] the GPU is in the site inventory; false: kept anyway, its energy is real
WITH day_rows AS (
    SELECT * EXCLUDE (reason)
    FROM int_gpu_samples_checked
    WHERE day = $day::DATE AND reason IS NULL
)
SELECT * FROM day_rows
