-- fct_sensitivity_daily: how fleet energy and PUE respond to what drives them, per day.
-- kind: day
-- grain: one row per (day, quantity, scope)
-- Written by models.sensitivity.sensitivity_day (delete-then-insert for the day). Quantities:
--   'energy_elasticity_to_utilization' (d ln E / d ln activity, unitless; hourly GPU energy,
--      within GPU model, memory activity held fixed)
--   'energy_elasticity_to_memory_bandwidth' (d ln E / d ln DRAM activity, unitless, same regression)
--   'pue_per_outdoor_c' (d PUE / d outdoor temperature, 1/C, IT load held fixed)
--   'pue_elasticity_to_it_load' (d ln PUE / d ln IT load, unitless, at the day's mean PUE and load)
--   'energy_elasticity_to_network_bandwidth' (d ln E / d ln network occupancy, unitless, utilisation
--      held fixed; per workload class and 'fleet')
--   'joint_part_pue', 'joint_part_idle_share', 'joint_part_network_bandwidth' (d PUE, d (1 - util),
--      d occupancy per d ln power: the parts of S, per workload class and 'fleet')
--   'joint_sensitivity_s' (S = part_pue + w1 part_idle_share + w2 part_network_bandwidth, with the
--      weights in the row; models.joint_sensitivity)
-- columns:
--   day [DATE] UTC day
--   quantity [text] which sensitivity (see above)
--   scope [text] 'fleet' for energy, the site name for PUE, the workload class (or 'fleet') for S
--   estimate [as unit] the sensitivity
--   ci_low [as unit] lower end of the 95% interval
--   ci_high [as unit] upper end of the 95% interval
--   std_error [as unit] standard error of the estimate
--   n_obs [count] GPU-hours or site-hours
--   n_groups [count] GPUs (or 1)
--   method [text] how the estimate and its interval were made: 'ols-fe+gpu-bootstrap' (within-model OLS, a
--     bootstrap over whole GPUs read with t(GPUs - 1)), 'ols-fe' (the same OLS with too few GPUs to resample:
--     its own errors, t on their residual degrees of freedom), 'ols' (a site's OLS, t likewise), or for S
--     'pue-ols+' and its GPU parts' method
--   unit [text] unit of estimate, ci_low, ci_high and std_error
--   weight_utilization [0..1] S's w1, normalised with w2 to sum to 1 (NULL on other rows)
--   weight_network_bandwidth [0..1] S's w2 (NULL on other rows)
--   typical_value [as unit] the source's typical value for the workload the scope is compared with
--   typical_workload [text] 'training-dense' (throughput class) | 'inference serving' (latency-sensitive)
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
    unit VARCHAR,
    weight_utilization DOUBLE,
    weight_network_bandwidth DOUBLE,
    typical_value DOUBLE,
    typical_workload VARCHAR
)
