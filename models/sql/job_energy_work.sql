-- job_energy_work: the work each chosen job reported, for comparing runs of the same profile that
-- did different amounts of it.
-- Grain: job_id. Input: job_energy_input_jobs (temp view over the jobs relation).
-- Parameters: $job_ids VARCHAR[].
-- Columns: job_id, work (samples_total summed over the job's GPUs where every row reports it,
--   else flops_total likewise; NULL where neither is complete).
SELECT
    job_id,
    CASE WHEN count(samples_total) = count(*) THEN sum(samples_total)
         WHEN count(flops_total) = count(*) THEN sum(flops_total) END AS work
FROM job_energy_input_jobs
WHERE job_id IN (SELECT unnest(CAST($job_ids AS VARCHAR[])))
GROUP BY job_id
