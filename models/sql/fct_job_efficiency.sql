-- fct_job_efficiency: energy and work done of each job on each GPU it held, for one UTC day.
-- kind: day
-- grain: one row per (day, job_id, gpu_uuid); a job crossing midnight has one row per day
-- Written by models.efficiency.build_efficiency (delete-then-insert for $day).
-- inputs: eff_input_jobs (temp table: the jobs relation, partitions near $day), stg_gpu_samples,
--   fct_gpu_energy_hourly.
-- Jobs: a (job_id, gpu_uuid, started_at) repeated in the jobs relation (a row shipped twice, a pod
--   extended after an earlier copy was compacted) counts once, its latest end (as acct_jobs.sql);
--   a job that held one GPU several times in the day (a requeue) is one row, its holdings summed.
-- Energy: each GPU-hour's energy_kwh (counter or power integral) is shared pro rata among what
--   ran in the hour by the power the samples read inside each job's window (the readings give the
--   shape, the hourly energy the total); by time where the hour has no power readings. A reading
--   inside the windows of several jobs at once (pods sharing a GPU) is split equally among them,
--   as the accounts split a GPU-hour by time held: the jobs of a GPU never sum to more than it drew.
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
WITH holdings AS (
    SELECT
        *,
        greatest(started_at, $day::DATE::TIMESTAMPTZ) AS a_at,
        least(ended_at, ($day::DATE + 1)::TIMESTAMPTZ) AS b_at
    FROM (
        SELECT DISTINCT ON (job_id, gpu_uuid, started_at)
            job_id, host, gpu_uuid, started_at, ended_at, stage, workload_class, team,
            requests_total, tokens_total, samples_total, flops_total
        FROM eff_input_jobs
        WHERE ended_at > started_at
          AND started_at < ($day::DATE + 1)::TIMESTAMPTZ
          AND ended_at > $day::DATE::TIMESTAMPTZ
        ORDER BY job_id, gpu_uuid, started_at, ended_at DESC
    )
),
jobs AS (
    -- one row per (job, GPU): its holdings of the GPU in the day together
    SELECT
        job_id, gpu_uuid,
        arg_max(host, started_at) AS host,
        arg_max(stage, started_at) AS stage,
        arg_max(workload_class, started_at) AS workload_class,
        arg_max(team, started_at) AS team,
        min(started_at) AS started_at,
        max(ended_at) AS ended_at,
        sum(epoch(b_at) - epoch(a_at)) / 3600.0 AS busy_hours,
        sum(epoch(b_at) - epoch(a_at)) / sum(epoch(ended_at) - epoch(started_at)) AS day_share_ratio,
        -- a holding's counters cover its whole run: the day's part of each
        sum(requests_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS requests_total,
        sum(tokens_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS tokens_total,
        sum(samples_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS samples_total,
        sum(flops_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS flops_total
    FROM holdings
    GROUP BY job_id, gpu_uuid
),
bounds AS (
    SELECT gpu_uuid, a_at AS t_at FROM holdings
    UNION
    SELECT gpu_uuid, b_at FROM holdings
),
pieces AS (
    -- a GPU's day cut at every start and end of a holding: inside a piece the same jobs hold it
    SELECT * FROM (
        SELECT gpu_uuid, t_at AS p0_at, lead(t_at) OVER (PARTITION BY gpu_uuid ORDER BY t_at) AS p1_at
        FROM bounds
    )
    WHERE p1_at IS NOT NULL
),
piece_holders AS (
    SELECT DISTINCT p.gpu_uuid, p.p0_at, p.p1_at, h.job_id
    FROM pieces AS p
    JOIN holdings AS h ON h.gpu_uuid = p.gpu_uuid AND h.a_at <= p.p0_at AND h.b_at >= p.p1_at
),
held_pieces AS (
    SELECT gpu_uuid, p0_at, p1_at, count(*) AS n_holders FROM piece_holders GROUP BY ALL
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
piece_hour_weights AS (
    SELECT p.gpu_uuid, p.p0_at, s.hour_at, any_value(p.n_holders) AS n_holders,
           sum(s.power_w) AS power_sum_w, count(*) AS n,
           mode(s.power_limit_w) AS power_limit_w,
           min(s.power_limit_w) <> max(s.power_limit_w) AS power_limit_changed
    FROM held_pieces AS p
    JOIN samples AS s ON s.gpu_uuid = p.gpu_uuid AND s.sampled_at >= p.p0_at AND s.sampled_at < p.p1_at
    GROUP BY p.gpu_uuid, p.p0_at, s.hour_at
),
job_hour_weights AS (
    SELECT ph.job_id, ph.gpu_uuid, w.hour_at,
           sum(w.power_sum_w / w.n_holders) AS power_sum_w,
           sum(w.n / w.n_holders) AS n_share,
           sum(w.n) AS n,
           arg_max(w.power_limit_w, w.n) AS power_limit_w,
           bool_or(w.power_limit_changed) OR count(DISTINCT w.power_limit_w) > 1 AS power_limit_changed
    FROM piece_holders AS ph
    JOIN piece_hour_weights AS w USING (gpu_uuid, p0_at)
    GROUP BY ALL
),
job_hour_energy AS (
    SELECT jh.job_id, jh.gpu_uuid, jh.n, jh.power_limit_w, jh.power_limit_changed,
           e.energy_kwh * CASE WHEN hw.power_sum_w > 0 THEN coalesce(jh.power_sum_w, 0) / hw.power_sum_w
                               ELSE jh.n_share / hw.n END AS energy_kwh
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
        j.started_at, j.ended_at, j.busy_hours, j.day_share_ratio,
        je.power_limit_w, je.power_limit_changed, coalesce(je.n_samples, 0) AS n_samples, je.energy_kwh,
        j.requests_total, j.tokens_total, j.samples_total, j.flops_total
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
