-- eff_holdings: each (job, GPU) holding that overlaps $day, once, with its part of the day.
-- Internal: a temp table of models.efficiency, read by fct_job_energy_hourly.sql and
-- fct_job_efficiency.sql so that both see the same jobs.
-- A (job_id, gpu_uuid, started_at) repeated in the jobs relation (a row shipped twice, a pod
--   extended after an earlier copy was compacted) counts once, its latest end (as the accounts'
--   acct_jobs.sql). A job without an end (still running) or ending before it started holds nothing.
-- A work count that is not a positive finite number is none reported (NULL): exporters write 0 for
--   none, and a negative count made J/token negative and cancelled the FLOPs of its group (0 FLOP/W).
-- columns: the jobs' job_id, host, gpu_uuid, started_at, ended_at, stage, workload_class, team,
--   requests_total, tokens_total, samples_total, flops_total, plus
--   a_at, b_at [TIMESTAMPTZ, UTC] the holding's part of $day: [a_at, b_at)
SELECT
    *,
    greatest(started_at, $day::DATE::TIMESTAMPTZ) AS a_at,
    least(ended_at, ($day::DATE + 1)::TIMESTAMPTZ) AS b_at
FROM (
    SELECT DISTINCT ON (job_id, gpu_uuid, started_at)
        job_id, host, gpu_uuid, started_at, ended_at, stage, workload_class, team,
        CASE WHEN requests_total > 0 AND isfinite(requests_total) THEN requests_total END AS requests_total,
        CASE WHEN tokens_total > 0 AND isfinite(tokens_total) THEN tokens_total END AS tokens_total,
        CASE WHEN samples_total > 0 AND isfinite(samples_total) THEN samples_total END AS samples_total,
        CASE WHEN flops_total > 0 AND isfinite(flops_total) THEN flops_total END AS flops_total
    FROM eff_input_jobs
    WHERE ended_at > started_at
      AND started_at < ($day::DATE + 1)::TIMESTAMPTZ
      AND ended_at > $day::DATE::TIMESTAMPTZ
    ORDER BY job_id, gpu_uuid, started_at, ended_at DESC
)
