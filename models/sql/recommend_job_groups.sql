-- recommend_job_groups: GPUs that ran the same job on one day (a multi-GPU job group).
-- Grain: job_id. Input: `reco_input_jobs` (temp view over the jobs relation), jobs overlapping $day.
-- Columns: job_id, gpu_uuids (list of text: the GPUs, sorted; at least two).
WITH overlap AS (
    SELECT DISTINCT job_id, gpu_uuid
    FROM reco_input_jobs
    WHERE started_at < CAST($day AS TIMESTAMPTZ) + INTERVAL 1 DAY AND ended_at > CAST($day AS TIMESTAMPTZ)
      AND job_id IS NOT NULL AND gpu_uuid IS NOT NULL
)
SELECT job_id, list(gpu_uuid ORDER BY gpu_uuid) AS gpu_uuids
FROM overlap GROUP BY job_id HAVING count(*) >= 2 ORDER BY job_id
