-- gpu_energy_daily (Spark SQL): the day's GPU-hours rolled up per host and GPU model, the input
-- size of the carbon and cost accounts (reports.accounts.carbon / reports.accounts.tco read GPU-hours, then do
-- their per-hour pricing and attribution in polars on GPUs x 24 rows, which fit one machine).
-- grain: one row per (day, host, gpu_model)
-- input: temp view fct_gpu_energy_hourly (warehouse/sql/fct_gpu_energy_hourly.sql as Spark runs it)
-- columns: day [DATE], host, gpu_model [text], n_gpus [count], gpu_hours [GPU-hours with any
--   reading: sum of coverage_ratio], energy_kwh [kWh, measured], avg_power_w [W over covered time]
SELECT
    day, host, gpu_model,
    count(DISTINCT gpu_uuid) AS n_gpus,
    sum(coverage_ratio) AS gpu_hours,
    sum(energy_kwh) AS energy_kwh,
    sum(energy_kwh) * 3.6e6 / nullif(sum(coverage_ratio) * 3600, 0) AS avg_power_w
FROM fct_gpu_energy_hourly
GROUP BY day, host, gpu_model
