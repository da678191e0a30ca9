-- fct_efficiency_setting_daily: energy per unit of work per GPU model and power setting, per day.
-- kind: day
-- grain: one row per (day, gpu_model, power_limit_w, stage, workload_class), from fct_job_efficiency
-- Written by models.efficiency.build_efficiency (delete-then-insert for $day).
-- Ratios are of sums (sum of work / sum of energy over the jobs that report that work), so a
--   short job weighs as much as its energy and no more; each job's work and time are those of the
--   part its energy was measured over (fct_job_efficiency.measured_hours), as its own ratios are.
-- columns:
--   day [DATE] UTC day
--   gpu_model [text] NVML name
--   power_limit_w [W] limit in force
--   stage [text] data-preparation | training | inference | evaluation
--   workload_class [text] latency-sensitive | throughput | background
--   n_jobs [count] distinct jobs
--   n_gpus [count] distinct GPUs
--   busy_hours [h] GPU-hours in jobs
--   energy_kwh [kWh] energy of those jobs
--   avg_power_w [W] energy over the measured part of the busy hours
--   requests_per_kwh [requests/kWh] EPOE (NULL where no job of the group reports requests)
--   j_per_token [J/token] energy per token (NULL where no job reports tokens)
--   j_per_sample [J/sample] energy per sample (NULL where no job reports samples)
--   flops_per_w [FLOP/J = (FLOP/s)/W] FLOPs per watt (NULL where no job reports FLOPs)
WITH day_jobs AS (
    SELECT * REPLACE (requests_total * measured_ratio AS requests_total, tokens_total * measured_ratio AS tokens_total,
                      samples_total * measured_ratio AS samples_total, flops_total * measured_ratio AS flops_total)
    FROM (SELECT *, measured_hours / nullif(busy_hours, 0) AS measured_ratio FROM fct_job_efficiency
          WHERE day = $day::DATE AND energy_kwh IS NOT NULL AND NOT coalesce(power_limit_changed, false))
)
SELECT
    day, gpu_model, power_limit_w, stage, workload_class,
    count(DISTINCT job_id) AS n_jobs,
    count(DISTINCT gpu_uuid) AS n_gpus,
    sum(busy_hours) AS busy_hours,
    sum(energy_kwh) AS energy_kwh,
    sum(energy_kwh) * 1000.0 / nullif(sum(measured_hours), 0) AS avg_power_w,
    sum(requests_total) / nullif(sum(energy_kwh) FILTER (WHERE requests_total IS NOT NULL), 0) AS requests_per_kwh,
    sum(energy_kwh) FILTER (WHERE tokens_total IS NOT NULL) * 3.6e6 / nullif(sum(tokens_total), 0) AS j_per_token,
    sum(energy_kwh) FILTER (WHERE samples_total IS NOT NULL) * 3.6e6 / nullif(sum(samples_total), 0) AS j_per_sample,
    sum(flops_total) / nullif(sum(energy_kwh) FILTER (WHERE flops_total IS NOT NULL) * 3.6e6, 0) AS flops_per_w
FROM day_jobs
GROUP BY ALL
