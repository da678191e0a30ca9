-- power_input_jobs: the jobs of the lake that the held-out samples can fall in: those in the
-- date= partitions (the UTC day of started_at) from $first_date to $day. Over raw_jobs unbounded,
-- the job-energy error opened every jobs file of the lake's history, day after day.
-- Grain: one row per jobs row. Inputs: raw_jobs.
-- parameters: $first_date [DATE] the first held-out sample's day less models.job_max_days; $day [DATE]
-- Columns: job_id, gpu_uuid [text]; started_at, ended_at [TIMESTAMPTZ, UTC]
SELECT job_id, gpu_uuid, started_at, ended_at
FROM raw_jobs
WHERE date BETWEEN $first_date::DATE AND $day::DATE
