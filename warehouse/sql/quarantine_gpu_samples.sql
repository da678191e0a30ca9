-- quarantine_gpu_samples: GPU readings that broke a rule, with the rule. For each day,
-- rows in raw_gpu_samples = rows in stg_gpu_samples + rows here.
-- kind: day
-- grain: one row per raw GPU reading that failed a rule
-- The device's own limits (power_limit_default_w, power_limit_min_w, power_limit_max_w) are left
--   out, as in stg_gpu_samples: fct_gpu_coverage_daily keeps them per GPU-day.
-- columns: the lake's gpu_samples columns, plus
--   day [DATE] UTC day of sampled_at
--   in_inventory [bool] the GPU is in the site inventory
--   reason [text] the first rule the row broke (see int_gpu_samples_checked.sql for the list)
WITH day_rows AS (
    SELECT * EXCLUDE (next_sampled_at, next_power_w, next_energy_mj_total, next_power_limit_w)
    FROM int_gpu_samples_checked
    WHERE day = $day::DATE AND reason IS NOT NULL
)
SELECT * FROM day_rows
