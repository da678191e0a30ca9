-- fct_job_efficiency: energy and work done of each job on each GPU it held, for one UTC day.
-- kind: day
-- grain: one row per (day, job_id, gpu_uuid); a job crossing midnight has one row per day
-- Written by models.efficiency.build_efficiency (delete-then-insert for $day).
-- inputs: eff_holdings (temp table, eff_holdings.sql: the jobs running on $day, found as the
--   accounts find them (models/day_jobs.py: started at most models.job_max_days before $day),
--   each holding once), fct_job_energy_hourly (the jobs' energy per hour), stg_gpu_samples (GPU models).
-- Jobs: a (job_id, gpu_uuid, started_at) repeated in the jobs relation (a row shipped twice, a pod
--   extended after an earlier copy was compacted) counts once, its latest end (as acct_jobs.sql);
--   a job that held one GPU several times in the day (a requeue) is one row, its holdings summed.
-- Energy: each GPU-hour's energy_kwh (counter or power integral) is shared pro rata among what
--   ran in the hour by fct_job_energy_hourly's energy_share_ratio: the energy the readings the hour's
--   energy came from drew inside each job's window (the readings give the shape, the hourly energy
--   the total); by count where the hour has no power readings. A reading
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
--   busy_hours [h] the job's run time within the day (overlapping runs of it counted once)
--   day_share_ratio [0..1] busy_hours as a share of its whole run
--   power_limit_w [W] power limit in force (most frequent reading)
--   power_limit_changed [bool] the limit changed during the run
--   n_samples [count] clean readings in the job's window
--   energy_kwh [kWh] GPU energy attributed to the job on the day (NULL: no hourly energy)
--   requests_total [count, pro-rated: fractional] requests served on the day (NULL: not reported)
--   tokens_total [count, pro-rated: fractional] tokens processed on the day (NULL: not reported)
--   samples_total [count, pro-rated: fractional] samples processed on the day (NULL: not reported)
--   flops_total [FLOP] floating-point operations on the day (NULL: not reported)
--   measured_hours [h] the part of busy_hours the energy was measured over (less where readings were
--     missing; NULL: no energy)
--   avg_power_w [W] energy_kwh over measured_hours; the ratios below likewise set the energy against
--     the work of the measured part (the work x measured_hours / busy_hours)
--   requests_per_kwh [requests/kWh] EPOE
--   j_per_token [J/token] energy per token
--   j_per_sample [J/sample] energy per sample
--   flops_per_w [FLOP/J = (FLOP/s)/W] FLOPs per watt
WITH holdings AS (
    -- each holding's time not already held by an earlier one of the same job and GPU: requeued runs
    -- that overlap held the GPU once (summed, 1.17 h for an hour held, and J/token 180 for 154)
    SELECT
        *,
        greatest(epoch(b_at) - epoch(greatest(a_at, coalesce(max(b_at) OVER held_before, a_at))), 0) AS new_s
    FROM eff_holdings
    WINDOW held_before AS (PARTITION BY job_id, gpu_uuid ORDER BY a_at, b_at
                           ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
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
        sum(new_s) / 3600.0 AS busy_hours,
        sum(epoch(b_at) - epoch(a_at)) / sum(epoch(ended_at) - epoch(started_at)) AS day_share_ratio,
        -- a holding's counters cover its whole run: the day's part of each
        sum(requests_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS requests_total,
        sum(tokens_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS tokens_total,
        sum(samples_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS samples_total,
        sum(flops_total * (epoch(b_at) - epoch(a_at)) / (epoch(ended_at) - epoch(started_at))) AS flops_total
    FROM holdings
    GROUP BY job_id, gpu_uuid
),
job_energy AS (
    SELECT job_id, gpu_uuid, sum(n_samples) AS n_samples, sum(energy_kwh) AS energy_kwh,
           sum(measured_s) / 3600.0 AS measured_hours,
           mode(power_limit_w) AS power_limit_w,
           bool_or(power_limit_changed) OR count(DISTINCT power_limit_w) > 1 AS power_limit_changed
    FROM fct_job_energy_hourly
    WHERE day = $day::DATE
    GROUP BY ALL
),
models AS (
    SELECT gpu_uuid, any_value(gpu_model) AS gpu_model FROM stg_gpu_samples WHERE day = $day::DATE GROUP BY ALL
),
rows AS (
    SELECT
        $day::DATE AS day, j.job_id, j.host, j.gpu_uuid, m.gpu_model, j.stage, j.workload_class, j.team,
        j.started_at, j.ended_at, j.busy_hours, j.day_share_ratio,
        je.power_limit_w, je.power_limit_changed, coalesce(je.n_samples, 0) AS n_samples, je.energy_kwh,
        j.requests_total, j.tokens_total, j.samples_total, j.flops_total,
        -- a reading's interval may reach past the window's end by up to one reading period: at most the time held
        CASE WHEN je.energy_kwh IS NOT NULL THEN least(coalesce(je.measured_hours, 0.0), j.busy_hours) END AS measured_hours
    FROM jobs AS j
    LEFT JOIN job_energy AS je USING (job_id, gpu_uuid)
    LEFT JOIN models AS m USING (gpu_uuid)
)
SELECT
    * EXCLUDE (measured_ratio),
    -- over the measured part of the holding: the energy stops where readings were missing, the
    -- time and the work do not (a collector down half of a job made it look twice as efficient)
    energy_kwh * 1000.0 / nullif(measured_hours, 0) AS avg_power_w,
    requests_total * measured_ratio / nullif(energy_kwh, 0) AS requests_per_kwh,
    energy_kwh * 3.6e6 / nullif(tokens_total * measured_ratio, 0) AS j_per_token,
    energy_kwh * 3.6e6 / nullif(samples_total * measured_ratio, 0) AS j_per_sample,
    flops_total * measured_ratio / nullif(energy_kwh * 3.6e6, 0) AS flops_per_w
FROM (SELECT *, measured_hours / nullif(busy_hours, 0) AS measured_ratio FROM rows)
