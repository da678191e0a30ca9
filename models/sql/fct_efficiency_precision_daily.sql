-- fct_efficiency_precision_daily: energy per unit of work by GPU model x precision x batch size, and
-- the batch that did the most work per joule, from the fleet's own jobs of one day.
-- kind: day
-- grain: one row per (day, gpu_model, precision, batch_size, work_unit)
-- Written by models.efficiency_precision.precision_efficiency_day (the day's rows replaced).
-- Inputs: fct_job_efficiency (energy and work per job and GPU on the day), eff_input_jobs (the jobs
-- relation near the day: precision and batch_size, NULL where the scheduler or job did not say).
-- eta = throughput / power (units per s per W = units per J): the batch with the highest eta of its
-- (GPU model, precision, unit) is the best; the saving is what this row's work would have taken at
-- the best batch's joules per unit (rows at the best batch save nothing).
-- columns:
--   day [DATE] UTC day
--   gpu_model [text] NVML name
--   precision [text] fp32 | tf32 | bf16 | fp16 | fp8 | int8 | int4 | 'not reported'
--   batch_size [count] batch size (NULL: not reported)
--   work_unit [text] 'token' | 'request' | 'sample'
--   n_jobs [count] job-GPU rows
--   busy_hours [h] the jobs' run time on the day
--   energy_kwh [kWh] their GPU energy
--   work_units [count] units of work done
--   j_per_unit [J/unit] energy per unit of work
--   throughput_units_per_s [units/s] work over run time
--   avg_power_w [W] energy over run time
--   eta_units_per_j [units/J] throughput / power
--   best_batch_size [count] the batch with the highest eta for this GPU model, precision and unit
--   saving_kwh_per_day [kWh/day] energy this row would not have used at the best batch
WITH jobs AS (
    SELECT DISTINCT job_id, gpu_uuid, "precision", batch_size FROM eff_input_jobs
),
rows AS (
    SELECT e.gpu_model, coalesce(j."precision", 'not reported') AS "precision", j.batch_size,
           u.work_unit, u.work_units, e.energy_kwh, e.busy_hours
    FROM fct_job_efficiency AS e
    LEFT JOIN jobs AS j USING (job_id, gpu_uuid)
    CROSS JOIN LATERAL (VALUES ('token', e.tokens_total), ('request', e.requests_total), ('sample', e.samples_total))
        AS u(work_unit, work_units)
    WHERE e.day = $day AND u.work_units > 0 AND e.energy_kwh > 0 AND e.busy_hours > 0 AND e.gpu_model IS NOT NULL
),
groups AS (
    SELECT gpu_model, "precision", batch_size, work_unit, count(*) AS n_jobs, sum(busy_hours) AS busy_hours,
           sum(energy_kwh) AS energy_kwh, sum(work_units) AS work_units
    FROM rows
    GROUP BY ALL
),
rated AS (
    SELECT *,
           energy_kwh * 3.6e6 / work_units AS j_per_unit,
           work_units / (busy_hours * 3600.0) AS throughput_units_per_s,
           energy_kwh * 1000.0 / busy_hours AS avg_power_w
    FROM groups
),
best AS (
    SELECT gpu_model, "precision", work_unit,
           arg_max(batch_size, work_units / (energy_kwh * 3.6e6)) AS best_batch_size,
           min(j_per_unit) AS best_j_per_unit
    FROM rated
    WHERE batch_size IS NOT NULL
    GROUP BY ALL
)
SELECT
    CAST($day AS DATE) AS day, r.gpu_model, r."precision", r.batch_size, r.work_unit, r.n_jobs, r.busy_hours,
    r.energy_kwh, r.work_units, r.j_per_unit, r.throughput_units_per_s, r.avg_power_w,
    r.throughput_units_per_s / r.avg_power_w AS eta_units_per_j,
    b.best_batch_size,
    -- the best batch itself saves exactly nothing (its own energy minus its units at its own J/unit
    -- is a rounding residue, not a saving)
    CASE WHEN r.batch_size = b.best_batch_size THEN 0.0
         WHEN r.batch_size IS NOT NULL THEN greatest(r.energy_kwh - r.work_units * b.best_j_per_unit / 3.6e6, 0) END
        AS saving_kwh_per_day
FROM rated AS r
LEFT JOIN best AS b USING (gpu_model, "precision", work_unit)
ORDER BY r.gpu_model, r."precision", r.work_unit, r.batch_size
