-- fct_sensitivity_daily: how fleet energy and PUE respond to what drives them, one row per day x quantity x scope.
-- Grain: day x quantity x scope (delete-then-insert for the day).
-- Columns and units:
--   day (DATE), quantity:
--     'energy_elasticity_to_utilization' (d ln E / d ln activity, unitless; hourly GPU energy,
--        within GPU model, memory activity held fixed)
--     'energy_elasticity_to_memory_bandwidth' (d ln E / d ln DRAM activity, unitless, same regression)
--     'pue_per_outdoor_c' (d PUE / d outdoor temperature, 1/C, IT load held fixed)
--     'pue_elasticity_to_it_load' (d ln PUE / d ln IT load, unitless, at the day's mean PUE and load)
--   scope ('fleet' for energy, the site name for PUE), estimate, ci_low, ci_high (95% interval,
--   same unit as the estimate), std_error, n_obs (GPU-hours or site-hours), n_groups (GPUs or 1),
--   method ('ols-fe+gpu-bootstrap' | 'ols'), unit (text)
CREATE TABLE IF NOT EXISTS fct_sensitivity_daily (
    day DATE NOT NULL,
    quantity VARCHAR NOT NULL,
    scope VARCHAR NOT NULL,
    estimate DOUBLE,
    ci_low DOUBLE,
    ci_high DOUBLE,
    std_error DOUBLE,
    n_obs BIGINT,
    n_groups BIGINT,
    method VARCHAR,
    unit VARCHAR
)
