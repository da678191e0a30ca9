-- fct_efficiency_precision_daily: energy per unit of work by GPU model x precision x batch size, and
-- the batch that did the most work per joule, from the fleet's own jobs of one day.
-- kind: day
-- grain: one row per (day, gpu_model, precision, batch_size, work_unit)
-- Written by models.efficiency_precision.precision_efficiency_day (the day's rows replaced).
-- Inputs: fct_job_efficiency (energy and work per job and GPU on the day), eff_input_jobs (the jobs
-- relation near the day: precision and batch_size, NULL where the scheduler or job did not say).
-- eta = throughput / power (units per s per W = units per J): the batch with the highest eta of its
-- (GPU model, precision, unit) is the best; the saving is what this row's work would have taken at
-- the best batch's joules per unit (rows at the best batch save nothing). Jobs of one group do
-- different work (another model, another sequence length), so a day's best batch can be the luckiest
-- group: saving_low_kwh_per_day is what is left of the saving once the best batch's J/unit is raised
-- by twice the combined standard error of the two groups' J/unit across their jobs.
-- columns:
--   day [DATE] UTC day
--   gpu_model [text] NVML name
--   precision [text] fp32 | tf32 | bf16 | fp16 | fp8 | int8 | int4 | 'not reported'
--   batch_size [count] batch size (NULL: not reported)
--   work_unit [text] 'token' | 'request' | 'sample'
--   n_jobs [count] job-GPU rows
--   busy_hours [h] the jobs' run time on the day over which their energy was measured
--   energy_kwh [kWh] their GPU energy
--   work_units [count, pro-rated: fractional] units of work done in that time
--   j_per_unit [J/unit] energy per unit of work
--   j_per_unit_se [J/unit] standard error of j_per_unit across the group's jobs (ratio estimator
--     over jobs, a multi-GPU job's GPUs summed as one: they move together; NULL with one job)
--   throughput_units_per_s [units/s] work over run time
--   avg_power_w [W] energy over run time
--   eta_units_per_j [units/J] throughput / power
--   best_batch_size [count] the batch with the highest eta for this GPU model, precision and unit
--   saving_kwh_per_day [kWh/day] energy this row would not have used at the best batch
--   saving_low_kwh_per_day [kWh/day] the saving the jobs' spread still supports (see above; NULL
--     where this row or the best batch has a single job, 0 at the best batch)
WITH jobs AS (
    -- one (precision, batch) per job and GPU on the day: a job whose runs of the day differed
    -- (requeued at another batch) is 'not reported' and NULL, counted once; one row per setting
    -- carried the whole job's energy and work each (0.5 kWh held for 0.25)
    SELECT job_id, gpu_uuid,
           CASE WHEN count(DISTINCT coalesce("precision", '')) = 1 THEN any_value("precision") END AS "precision",
           CASE WHEN count(DISTINCT coalesce(batch_size, -1)) = 1 THEN any_value(batch_size) END AS batch_size
    FROM eff_input_jobs
    WHERE ended_at > $day::DATE::TIMESTAMPTZ AND started_at < ($day::DATE + 1)::TIMESTAMPTZ
    GROUP BY job_id, gpu_uuid
),
measured AS (
    -- the work of the part of the run the energy was measured over, and that time (as
    -- fct_efficiency_setting_daily): a collector down a third of a job made it a third more efficient
    SELECT * REPLACE (requests_total * measured_ratio AS requests_total, tokens_total * measured_ratio AS tokens_total,
                      samples_total * measured_ratio AS samples_total, measured_hours AS busy_hours)
    FROM (SELECT *, measured_hours / nullif(busy_hours, 0) AS measured_ratio FROM fct_job_efficiency WHERE day = $day)
),
rows AS (
    SELECT e.job_id, e.gpu_model, coalesce(j."precision", 'not reported') AS "precision", j.batch_size,
           u.work_unit, u.work_units, e.energy_kwh, e.busy_hours
    FROM measured AS e
    LEFT JOIN jobs AS j USING (job_id, gpu_uuid)
    CROSS JOIN LATERAL (VALUES ('token', e.tokens_total), ('request', e.requests_total), ('sample', e.samples_total))
        AS u(work_unit, work_units)
    WHERE u.work_units > 0 AND e.energy_kwh > 0 AND e.busy_hours > 0 AND e.gpu_model IS NOT NULL
),
per_job AS (
    SELECT gpu_model, "precision", batch_size, work_unit, job_id, count(*) AS n_rows, sum(busy_hours) AS busy_hours,
           sum(energy_kwh) AS energy_kwh, sum(work_units) AS work_units
    FROM rows
    GROUP BY ALL
),
groups AS (
    SELECT gpu_model, "precision", batch_size, work_unit, sum(n_rows) AS n_jobs, count(*) AS n_distinct_jobs,
           sum(busy_hours) AS busy_hours, sum(energy_kwh) AS energy_kwh, sum(work_units) AS work_units,
           -- sums for the ratio estimator's residuals sum((E_i - R U_i)^2) over jobs, E in J
           sum(power(energy_kwh * 3.6e6, 2)) AS e2, sum(energy_kwh * 3.6e6 * work_units) AS eu,
           sum(power(work_units, 2)) AS u2
    FROM per_job
    GROUP BY ALL
),
rated AS (
    SELECT *,
           energy_kwh * 3.6e6 / work_units AS j_per_unit,
           work_units / (busy_hours * 3600.0) AS throughput_units_per_s,
           energy_kwh * 1000.0 / busy_hours AS avg_power_w,
           CASE WHEN n_distinct_jobs > 1 THEN sqrt(greatest(n_distinct_jobs / (n_distinct_jobs - 1.0)
               * (e2 - 2 * (energy_kwh * 3.6e6 / work_units) * eu + power(energy_kwh * 3.6e6 / work_units, 2) * u2), 0))
               / work_units END AS j_per_unit_se
    FROM groups
),
best AS (
    SELECT gpu_model, "precision", work_unit, batch_size AS best_batch_size, j_per_unit AS best_j_per_unit,
           j_per_unit_se AS best_j_per_unit_se
    FROM rated
    WHERE batch_size IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY gpu_model, "precision", work_unit
                               ORDER BY work_units / (energy_kwh * 3.6e6) DESC, batch_size) = 1
)
SELECT
    CAST($day AS DATE) AS day, r.gpu_model, r."precision", r.batch_size, r.work_unit, r.n_jobs, r.busy_hours,
    r.energy_kwh, r.work_units, r.j_per_unit, r.j_per_unit_se, r.throughput_units_per_s, r.avg_power_w,
    r.throughput_units_per_s / r.avg_power_w AS eta_units_per_j,
    b.best_batch_size,
    -- the best batch itself saves exactly nothing (its own energy minus its units at its own J/unit
    -- is a rounding residue, not a saving)
    CASE WHEN r.batch_size = b.best_batch_size THEN 0.0
         WHEN r.batch_size IS NOT NULL THEN greatest(r.energy_kwh - r.work_units * b.best_j_per_unit / 3.6e6, 0) END
        AS saving_kwh_per_day,
    CASE WHEN r.batch_size = b.best_batch_size THEN 0.0
         WHEN r.batch_size IS NOT NULL AND r.j_per_unit_se IS NOT NULL AND b.best_j_per_unit_se IS NOT NULL
         THEN greatest(r.energy_kwh - r.work_units * (b.best_j_per_unit
                       + 2 * sqrt(power(r.j_per_unit_se, 2) + power(b.best_j_per_unit_se, 2))) / 3.6e6, 0) END
        AS saving_low_kwh_per_day
FROM rated AS r
LEFT JOIN best AS b USING (gpu_model, "precision", work_unit)
ORDER BY r.gpu_model, r."precision", r.work_unit, r.batch_size
