-- fct_job_efficiency: energy and work done of each job on each GPU it held, for one UTC day.
-- kind: day
-- grain: one row per (day, job_id, gpu_uuid); a job crossing midnight has one row per day
-- Written by models.efficiency.build_efficiency (delete-then-insert for $day).
-- inputs: eff_input_jobs (temp table: the jobs relation, partitions near $day), stg_gpu_samples,
--   fct_gpu_energy_hourly.
-- Energy: each GPU-hour's energy_kwh (counter or power integral) is shared pro rata among what
--   ran in the hour by the power the samples read inside each job's window (the readings give the
--   shape, the hourly energy the total); by time where the hour has no power readings.
-- Work: the job's counters (requests, tokens, samples, FLOPs) times the share of the job's run
--   time that falls on $day (counters are totals per job; assumed uniform over its run).
-- columns:
--   day [DATE] UTC day
--   job_id [text] job
--   host [text] server the GPU sits in
--   gpu_uuid [text] GPU
--   gpu_model [text] NVML name
--   stage [text] data-preparation | training | inference | evaluation
--   workload_class [text] latency-sensitive | throughput | background
--   team [text] team that ran the job
--   started_at [TIMESTAMPTZ, UTC] start of the job's whole run on this GPU
--   ended_at [TIMESTAMPTZ, UTC] end of the job's whole run on this GPU
--   busy_hours [h] the job's run time within the day
--   day_share_ratio [0..1] busy_hours as a share of its whole run
--   power_limit_w [W] power limit in force (most frequent reading)
--   power_limit_changed [bool] the limit changed during the run
--   n_samples [count] clean readings in the job's window
--   energy_kwh [kWh] GPU energy attributed to the job on the day (NULL: no hourly energy)
--   requests_total [count, pro-rated: fractional] requests served on the day (NULL: not reported)
--   tokens_total [count, pro-rated: fractional] tokens processed on the day (NULL: not reported)
--   samples_total [count, pro-rated: fractional] samples processed on the day (NULL: not reported)
--   flops_total [FLOP] floating-point operations on the day (NULL: not reported)
--   avg_power_w [W] energy_kwh over busy_hours
--   requests_per_kwh [requests/kWh] EPOE
--   j_per_token [J/token] energy per token
--   j_per_sample [J/sample] energy per sample
--   flops_per_w [FLOP/J = (FLOP/s)/W] FLOPs per watt
WITH jobs AS (
    SELECT
        job_id, host, gpu_uuid, started_at, ended_at, stage, workload_class, team,
        requests_total, tokens_total, samples_total, flops_total,
        greatest(started_at, $day::DATE::TIMESTAMPTZ) AS a_at,
        least(ended_at, ($day::DATE + 1)::TIMESTAMPTZ) AS b_at,
        (epoch(least(ended_at, ($day::DATE + 1)::TIMESTAMPTZ)) - epoch(greatest(started_at, $day::DATE::TIMESTAMPTZ)))
            / (epoch(ended_at) - epoch(started_at)) AS day_share_ratio
    FROM eff_input_jobs
    WHERE ended_at > started_at
      AND started_at < ($day::DATE + 1)::TIMESTAMPTZ
      AND ended_at > $day::DATE::TIMESTAMPTZ
),
samples AS (
    SELECT gpu_uuid, sampled_at, date_trunc('hour', sampled_at) AS hour_at,
           CAST(power_w AS DOUBLE) AS power_w, CAST(power_limit_w AS DOUBLE) AS power_limit_w
    FROM stg_gpu_samples
    WHERE day = $day::DATE
),
hour_weights AS (
    SELECT gpu_uuid, hour_at, sum(power_w) AS power_sum_w, count(*) AS n
    FROM samples GROUP BY ALL
),
job_hour_weights AS (
    SELECT j.job_id, j.gpu_uuid, s.hour_at,
           sum(s.power_w) AS power_sum_w, count(*) AS n,
           mode(s.power_limit_w) AS power_limit_w,
           min(s.power_limit_w) <> max(s.power_limit_w) AS power_limit_changed
    FROM jobs AS j
    JOIN samples AS s ON s.gpu_uuid = j.gpu_uuid AND s.sampled_at >= j.a_at AND s.sampled_at < j.b_at
    GROUP BY ALL
),
job_hour_energy AS (
    SELECT jh.job_id, jh.gpu_uuid, jh.n, jh.power_limit_w, jh.power_limit_changed,
           e.energy_kwh * CASE WHEN hw.power_sum_w > 0 THEN coalesce(jh.power_sum_w, 0) / hw.power_sum_w
                               ELSE jh.n / hw.n END AS energy_kwh
    FROM job_hour_weights AS jh
    JOIN hour_weights AS hw USING (gpu_uuid, hour_at)
    LEFT JOIN fct_gpu_energy_hourly AS e
        ON e.gpu_uuid = jh.gpu_uuid AND e.hour_at = jh.hour_at AND e.day = $day::DATE
),
job_energy AS (
    SELECT job_id, gpu_uuid, sum(n) AS n_samples, sum(energy_kwh) AS energy_kwh,
           mode(power_limit_w) AS power_limit_w,
           bool_or(power_limit_changed) OR count(DISTINCT power_limit_w) > 1 AS power_limit_changed
    FROM job_hour_energy GROUP BY ALL
),
models AS (
    SELECT gpu_uuid, any_value(gpu_model) AS gpu_model FROM stg_gpu_samples WHERE day = $day::DATE GROUP BY ALL
),
rows AS (
    SELECT
        $day::DATE AS day, j.job_id, j.host, j.gpu_uuid, m.gpu_model, j.stage, j.workload_class, j.team,
        j.started_at, j.ended_at,
        (epoch(j.b_at) - epoch(j.a_at)) / 3600.0 AS busy_hours,
        j.day_share_ratio,
        je.power_limit_w, je.power_limit_changed, coalesce(je.n_samples, 0) AS n_samples, je.energy_kwh,
        j.requests_total * j.day_share_ratio AS requests_total,
        j.tokens_total * j.day_share_ratio AS tokens_total,
        j.samples_total * j.day_share_ratio AS samples_total,
        j.flops_total * j.day_share_ratio AS flops_total
    FROM jobs AS j
    LEFT JOIN job_energy AS je USING (job_id, gpu_uuid)
    LEFT JOIN models AS m USING (gpu_uuid)
)
SELECT
    *,
    energy_kwh * 1000.0 / nullif(busy_hours, 0) AS avg_power_w,
    requests_total / nullif(energy_kwh, 0) AS requests_per_kwh,
    energy_kwh * 3.6e6 / nullif(tokens_total, 0) AS j_per_token,
    energy_kwh * 3.6e6 / nullif(samples_total, 0) AS j_per_sample,
    flops_total / nullif(energy_kwh * 3.6e6, 0) AS flops_per_w
FROM rows
