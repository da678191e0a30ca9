-- fct_sensitivity_hourly: the joint sensitivity S and its parts over a sliding window of hours.
-- kind: day
-- grain: one row per (day, hour_at, scope, quantity)
-- Written by models.joint_sensitivity.sliding_window_day (the day's rows replaced): for each hour
-- of the day, the GPU-hours and site-hours of the `[sensitivity] window_hours` hours ending with it
-- (the day's own hours: the first windows are shorter), within-GPU-model OLS with t intervals.
-- Quantities as in fct_sensitivity_daily: 'joint_part_pue', 'joint_part_idle_share',
-- 'joint_part_network_bandwidth', 'joint_sensitivity_s'.
-- columns:
--   day [DATE] UTC day
--   hour_at [TIMESTAMPTZ] start of the window's last hour (UTC)
--   window_hours [h] hours in the window
--   scope [text] workload class or 'fleet'
--   quantity [text] which part, or S
--   estimate [as fct_sensitivity_daily.unit] the estimate over the window
--   ci_low [as estimate] lower end of the 95% interval
--   ci_high [as estimate] upper end of the 95% interval
--   n_obs [count] GPU-hours in the window
--   weight_utilization [0..1] S's w1 (NULL on the parts' rows)
--   weight_network_bandwidth [0..1] S's w2 (NULL on the parts' rows)
CREATE TABLE IF NOT EXISTS fct_sensitivity_hourly (
    day DATE NOT NULL,
    hour_at TIMESTAMPTZ NOT NULL,
    window_hours INTEGER,
    scope VARCHAR NOT NULL,
    quantity VARCHAR NOT NULL,
    estimate DOUBLE,
    ci_low DOUBLE,
    ci_high DOUBLE,
    n_obs BIGINT,
    weight_utilization DOUBLE,
    weight_network_bandwidth DOUBLE
)
