-- acct_jobs: (job, GPU) allocations that overlap one day, deduplicated.
-- Grain: one row per (job_id, gpu_uuid, started_at): a job may hold a GPU twice in a day (a
-- StatefulSet pod recreated under its name, a requeued job), each holding its own row.
-- job_id, host, gpu_uuid, started_at/ended_at TIMESTAMPTZ (UTC), user, team, stage,
-- workload_class, deferrable, flops_total (FLOP over the whole allocation, may be NULL).
-- team, user and stage are optional in the jobs contract (a scheduler's accounting has no stage,
-- a job may have no account): the accounts' rows need a name, so a missing one is said as such
-- ('no team', 'no user', 'unspecified') rather than failing the day.
-- From acct_input_jobs (a temp table, models/sql/day_jobs.sql staged by models.day_jobs, as the
-- efficiency step stages its own): the jobs whose interval overlaps the day among those started
-- at most models.job_max_days before it (the jobs are partitioned by their start date), so the
-- accounts split a GPU-hour among the jobs fct_job_energy_hourly measured shares for.
WITH overlapping AS (
    SELECT job_id, host, gpu_uuid, started_at, ended_at, coalesce("user", 'no user') AS "user",
           coalesce(team, 'no team') AS team, coalesce(stage, 'unspecified') AS stage, workload_class, "deferrable", flops_total
    FROM acct_input_jobs
),
deduplicated AS (
    SELECT DISTINCT ON (job_id, gpu_uuid, started_at) *
    FROM overlapping
    -- the latest end first: a row extended after an earlier copy of it was compacted or shipped
    -- (a pod holding a GPU across midnight, collectors/sources/dcgm_pods.py) counts once, whole
    ORDER BY job_id, gpu_uuid, started_at, ended_at DESC
)
SELECT * FROM deduplicated ORDER BY gpu_uuid, started_at
