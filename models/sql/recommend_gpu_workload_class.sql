-- recommend_gpu_workload_class: the workload class each GPU spent most job time in on one day.
-- Grain: gpu_uuid. Input: `reco_input_jobs` (temp view over the jobs relation), jobs overlapping $day.
-- Columns: gpu_uuid, workload_class, job_hours (h of that class's jobs on the day).
-- A (job_id, gpu_uuid, started_at) repeated in the jobs relation (a row shipped twice, a job
-- extended later) counts once, its latest end, as in eff_holdings.sql: counted twice, a
-- duplicated background row outweighed the GPU's latency-sensitive service.
WITH holdings AS (
    SELECT DISTINCT ON (job_id, gpu_uuid, started_at) gpu_uuid, workload_class, started_at, ended_at
    FROM reco_input_jobs
    WHERE started_at < CAST($day AS TIMESTAMPTZ) + INTERVAL 1 DAY AND ended_at > CAST($day AS TIMESTAMPTZ)
    ORDER BY job_id, gpu_uuid, started_at, ended_at DESC
),
overlap AS (
    SELECT gpu_uuid, workload_class,
           (epoch(least(ended_at, CAST($day AS TIMESTAMPTZ) + INTERVAL 1 DAY))
            - epoch(greatest(started_at, CAST($day AS TIMESTAMPTZ)))) / 3600.0 AS hours
    FROM holdings
    WHERE workload_class IS NOT NULL
),
per_class AS (
    SELECT gpu_uuid, workload_class, sum(hours) AS job_hours FROM overlap GROUP BY gpu_uuid, workload_class
)
-- Of classes with equal hours, the strictest: arg_max left the tie to the order rows arrived in, and
-- half of the GPUs serving latency 12 h of 24 were capped as background work.
SELECT gpu_uuid, workload_class, job_hours
FROM per_class
QUALIFY row_number() OVER (
    PARTITION BY gpu_uuid
    ORDER BY job_hours DESC,
             CASE workload_class WHEN 'latency-sensitive' THEN 0 WHEN 'throughput' THEN 1
                                 WHEN 'background' THEN 2 ELSE 3 END,
             workload_class
) = 1
