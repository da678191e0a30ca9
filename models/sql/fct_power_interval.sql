-- fct_power_interval: the energy-optimal power limits within each workload class's slowdown bound,
-- per GPU model and workload bottleneck, one day (models.recommend's rule for a cap); bottleneck
-- 'mix' is a class's GPUs of the model on their whole day together, scored as the recommender
-- scores each GPU (the row its caps follow where the GPUs mix kinds of work).
-- kind: day
-- grain: one row per (day, gpu_model, bottleneck, workload_class)
-- Written by models.power_interval.power_interval_day (delete-then-insert for the day).
-- columns:
--   day [DATE] UTC day
--   gpu_model [text] NVML name
--   bottleneck [text] 'compute-bound' | 'memory-bound' | 'communication-bound' | 'mix'
--   workload_class [text] 'throughput' | 'background' (the classes given caps)
--   max_slowdown_pct [%] the class's slowdown bound the interval keeps within ([recommend])
--   busy_share [0..1] share of the model's busy samples with this bottleneck (mix: share of the
--     model's busy hours on GPUs of this class)
--   best_limit_w [W] power limit with the least energy per unit of work within the bound and
--     at or above the lowest limit recommended (min_limit_share_of_default of the default)
--   best_limit_w_low [W] lowest limit whose energy per work is within $tolerance of the best
--   best_limit_w_high [W] highest such limit (low..high: the near-optimal interval)
--   default_limit_w [W] the default the gains are counted from: the highest of the model's GPUs' defaults, each
--     as the recommender takes it (the device's own report first, models/device_limits.py)
--   perf_per_watt_gain_pct [%] work per joule at best_limit_w over that at the default limit, minus 100
--   slowdown_at_best_pct [%] run time at best_limit_w over that at the default limit, minus 100
--   heavy_slowdown_at_best_pct [%] the same for the heavier half of the busy samples (what the bound holds)
CREATE TABLE IF NOT EXISTS fct_power_interval (
    day DATE NOT NULL,
    gpu_model VARCHAR NOT NULL,
    bottleneck VARCHAR NOT NULL,
    workload_class VARCHAR,
    max_slowdown_pct DOUBLE,
    busy_share DOUBLE,
    best_limit_w DOUBLE,
    best_limit_w_low DOUBLE,
    best_limit_w_high DOUBLE,
    default_limit_w DOUBLE,
    perf_per_watt_gain_pct DOUBLE,
    slowdown_at_best_pct DOUBLE,
    heavy_slowdown_at_best_pct DOUBLE
)
