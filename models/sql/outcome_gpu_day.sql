-- outcome_gpu_day: each GPU's day as the before/after comparison of models.outcome sees it.
-- grain: one row per (gpu_uuid, day) for days $first_day..$day with clean readings.
-- inputs: gpu_activity_samples (one activity stream per GPU and day), fct_gpu_energy_hourly, fct_job_efficiency (when it exists: else an
--   empty stand-in, outcome_input_jobs).
-- columns:
--   gpu_uuid, host, gpu_model [text]; day [DATE]
--   power_limit_w [W] most frequent limit read that day; n_power_limits [count] distinct limits
--     read (more than 1: the limit changed during the day, the day is a transition)
--   energy_kwh [kWh] the GPU's whole-day energy; active_hours [h] hours with activity above 5% (the
--     share of the samples with an activity reading, times the hours the samples span; NULL: none)
--   active_energy_kwh [kWh] the energy of those hours: the mean power of the busy samples (one
--     stream a day, read at its own steady rate) x active_hours. The savings' fallback divides it by
--     active_hours; with the whole day's energy (idle hours included) a day with fewer busy hours
--     read as a rise per active hour (-27% for a cap that never bound, busy 20 h -> 10 h)
--   p99_power_w [W] the 99th percentile of the day's power readings: a lower limit that stays above it
--     before the change never binds, and saves nothing
--   job_energy_kwh [kWh], job_hours [h] energy and time in jobs (runs whose limit did not change)
--   flops_total [FLOP], samples_total, requests_total [count] work done in those jobs
--   n_jobs [count]; n_jobs_without_flops, n_jobs_without_samples, n_jobs_without_requests [count]
--     jobs not reporting that work (NULL or 0)
WITH samples AS (
    SELECT gpu_uuid, day, any_value(host) AS host, any_value(gpu_model) AS gpu_model,
           mode(CAST(power_limit_w AS DOUBLE)) AS power_limit_w,
           count(DISTINCT power_limit_w) AS n_power_limits,
           -- over the samples with an activity reading: one without is unknown, not idle (as idle,
           -- a third of a busy hour unread gave 0.67 active hours, and its energy per active hour 1.5x)
           avg(CASE WHEN activity_ratio > 0.05 THEN 1.0 WHEN activity_ratio IS NOT NULL THEN 0.0 END)
               * (epoch(max(sampled_at)) - epoch(min(sampled_at))) / 3600.0 AS active_hours,
           avg(CAST(power_w AS DOUBLE)) FILTER (WHERE activity_ratio > 0.05) AS busy_power_w,
           quantile_cont(CAST(power_w AS DOUBLE), 0.99) AS p99_power_w
    FROM gpu_activity_samples
    WHERE day BETWEEN $first_day::DATE AND $day::DATE
    GROUP BY gpu_uuid, day
),
energy AS (
    SELECT gpu_uuid, day, sum(energy_kwh) AS energy_kwh
    FROM fct_gpu_energy_hourly
    WHERE day BETWEEN $first_day::DATE AND $day::DATE
    GROUP BY ALL
),
jobs AS (
    SELECT gpu_uuid, day,
           sum(energy_kwh) AS job_energy_kwh, sum(busy_hours) AS job_hours,
           sum(flops_total) AS flops_total, sum(samples_total) AS samples_total, sum(requests_total) AS requests_total,
           count(*) AS n_jobs,
           count(*) FILTER (WHERE flops_total IS NULL OR flops_total <= 0) AS n_jobs_without_flops,
           count(*) FILTER (WHERE samples_total IS NULL OR samples_total <= 0) AS n_jobs_without_samples,
           count(*) FILTER (WHERE requests_total IS NULL OR requests_total <= 0) AS n_jobs_without_requests
    FROM outcome_input_jobs
    WHERE day BETWEEN $first_day::DATE AND $day::DATE
      AND energy_kwh IS NOT NULL AND NOT coalesce(power_limit_changed, false)
    GROUP BY ALL
)
SELECT s.gpu_uuid, s.host, s.gpu_model, s.day, s.power_limit_w, s.n_power_limits, s.p99_power_w, e.energy_kwh,
       s.active_hours,
       s.busy_power_w * s.active_hours / 1000.0 AS active_energy_kwh,
       j.job_energy_kwh, j.job_hours, j.flops_total, j.samples_total, j.requests_total,
       coalesce(j.n_jobs, 0) AS n_jobs, j.n_jobs_without_flops, j.n_jobs_without_samples, j.n_jobs_without_requests
FROM samples AS s
LEFT JOIN energy AS e USING (gpu_uuid, day)
LEFT JOIN jobs AS j USING (gpu_uuid, day)
ORDER BY s.gpu_uuid, s.day
