-- recommend_gpu_workload_class: the workload class each GPU spent most job time in on one day.
-- Grain: gpu_uuid. Input: `reco_input_jobs` (temp view over the jobs relation), jobs overlapping $day.
-- Columns: gpu_uuid, workload_class, job_hours (h of that class's jobs on the day).
-- A (job_id, gpu_uuid, started_at) repeated in the jobs relation (a row shipped twice, a job
-- extended later) counts once, its latest end, as in eff_holdings.sql: counted twice, a
-- duplicated background row outweighed the GPU's latency-sensitive service.
-- Of copies with the same end but different classes (a job relabelled), the strictest, as of
-- classes with equal hours below: the first copy read made a latency-sensitive job background or
-- not as the rows happened to arrive.
WITH classed AS (
    SELECT *, CASE workload_class WHEN 'latency-sensitive' THEN 0 WHEN 'throughput' THEN 1
                                  WHEN 'background' THEN 2 ELSE 3 END AS strictness
    FROM reco_input_jobs
    WHERE started_at < CAST($day AS TIMESTAMPTZ) + INTERVAL 1 DAY AND ended_at > CAST($day AS TIMESTAMPTZ)
),
holdings AS (
    SELECT DISTINCT ON (job_id, gpu_uuid, started_at) gpu_uuid, workload_class, strictness, started_at, ended_at
    FROM classed
    ORDER BY job_id, gpu_uuid, started_at, ended_at DESC, strictness, workload_class
),
overlap AS (
    SELECT gpu_uuid, workload_class, strictness,
           (epoch(least(ended_at, CAST($day AS TIMESTAMPTZ) + INTERVAL 1 DAY))
            - epoch(greatest(started_at, CAST($day AS TIMESTAMPTZ)))) / 3600.0 AS hours
    FROM holdings
    WHERE workload_class IS NOT NULL
),
per_class AS (
    SELECT gpu_uuid, workload_class, any_value(strictness) AS strictness, sum(hours) AS job_hours
    FROM overlap GROUP BY gpu_uuid, workload_class
)
-- Of classes with equal hours, the strictest: arg_max left the tie to the order rows arrived in, and
-- half of the GPUs serving latency 12 h of 24 were capped as background work.
SELECT gpu_uuid, workload_class, job_hours
FROM per_class
QUALIFY row_number() OVER (
    PARTITION BY gpu_uuid
    ORDER BY job_hours DESC, strictness, workload_class
) = 1
