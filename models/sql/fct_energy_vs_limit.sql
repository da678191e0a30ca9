-- fct_energy_vs_limit: the predicted energy-vs-limit curve per GPU model and bottleneck, one day.
-- kind: day
-- grain: one row per (day, gpu_model, bottleneck, power_limit_w)
-- Written by models.power_interval.power_interval_day (delete-then-insert for the day).
-- columns:
--   day [DATE] UTC day
--   gpu_model [text] NVML name
--   bottleneck [text] 'compute-bound' | 'memory-bound' | 'communication-bound'
--   is_dominant_bottleneck [bool] the model's most common one: draw that curve when drawing one per model
--   power_limit_w [W] the limit
--   relative_energy [ratio] energy per unit of work / that at the default limit
--   relative_time [ratio] run time / that at the default limit
--   power_w [W] predicted board power under the limit
--   energy_kwh [kWh] for the work one hour at the default limit does: power_w x relative_time / 1000
CREATE TABLE IF NOT EXISTS fct_energy_vs_limit (
    day DATE NOT NULL,
    gpu_model VARCHAR NOT NULL,
    bottleneck VARCHAR NOT NULL,
    is_dominant_bottleneck BOOLEAN,
    power_limit_w DOUBLE NOT NULL,
    relative_energy DOUBLE,
    relative_time DOUBLE,
    power_w DOUBLE,
    energy_kwh DOUBLE
)
