-- stg_gpu_samples: clean GPU readings, one day per build; bad rows are in quarantine_gpu_samples.
-- kind: readings
-- stored: as Parquet files beside the warehouse file (`<db stem>/readings/stg_gpu_samples/day=*/`),
--   written once per build and read through a view over exactly the day's current files
--   (warehouse/readings.py); days past warehouse.readings_retention_days are no longer listed
-- grain: one row per (gpu_uuid, sampled_at, source) that passed every quarantine rule
-- The lake's columns carry their units in their names: power_w [W], energy_mj_total [mJ counter
--   since driver load], temp_c [degC], *_ratio [0..1], *_pct [0..100], *_mhz [MHz].
-- The device's own limits (power_limit_default_w, power_limit_min_w, power_limit_max_w) are left
--   out: one value per GPU, fct_gpu_coverage_daily keeps them per GPU-day.
-- columns: the lake's gpu_samples columns, plus
--   day [DATE] UTC day of sampled_at
--   in_inventory [bool] the GPU is in the site inventory; false: kept anyway, its energy is real
--   interval_s [s] time to the next energy reading of the same (host, gpu_uuid, source) stream,
--     however long (the energy rules decide what is bridged); NULL for the stream's last reading
--     and for a reading with neither power nor counter
WITH day_rows AS (
    SELECT
        * EXCLUDE (reason, next_sampled_at, next_power_w, next_energy_mj_total, next_power_limit_w),
        epoch(next_sampled_at) - epoch(sampled_at) AS interval_s
    FROM int_gpu_samples_checked
    WHERE day = $day::DATE AND reason IS NULL
)
SELECT * FROM day_rows
