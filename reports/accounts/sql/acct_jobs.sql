-- acct_jobs: (job, GPU) allocations that overlap one day, deduplicated.
-- Grain: one row per (job_id, gpu_uuid). Parameters: $day_start, $day_end (TIMESTAMPTZ, UTC).
-- job_id, host, gpu_uuid, started_at/ended_at TIMESTAMPTZ (UTC), user, team, stage,
-- workload_class, deferrable, flops_total (FLOP over the whole allocation, may be NULL).
-- team, user and stage are optional in the jobs contract (a scheduler's accounting has no stage,
-- a job may have no account): the accounts' rows need a name, so a missing one is said as such
-- ('no team', 'no user', 'unspecified') rather than failing the day.
-- Jobs are partitioned by their start date, so a job running into this day from an earlier
-- one is found by its interval, not its partition.
WITH overlapping AS (
    SELECT job_id, host, gpu_uuid, started_at, ended_at, coalesce("user", 'no user') AS "user",
           coalesce(team, 'no team') AS team, coalesce(stage, 'unspecified') AS stage, workload_class, "deferrable", flops_total
    FROM raw_jobs
    WHERE started_at < $day_end AND (ended_at > $day_start OR ended_at IS NULL)
),
deduplicated AS (
    SELECT DISTINCT ON (job_id, gpu_uuid) *
    FROM overlapping
    ORDER BY job_id, gpu_uuid, started_at
)
SELECT * FROM deduplicated ORDER BY gpu_uuid, started_at
