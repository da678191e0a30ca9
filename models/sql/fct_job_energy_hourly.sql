-- fct_job_energy_hourly: the GPU energy of each job in each hour of each GPU it held, for one UTC day.
-- kind: day
-- grain: one row per (day, hour_at, job_id, gpu_uuid) with a clean reading of the GPU in the job's
--   window (a job held the GPU between two readings only: no row)
-- Written by models.efficiency.build_efficiency (delete-then-insert for $day); fct_job_efficiency
--   sums it per job, and the accounts (reports/accounts/attribution.py) split each GPU-hour's
--   energy-driven amounts (energy, operational carbon, energy cost) by energy_share_ratio.
-- inputs: eff_holdings (temp table, eff_holdings.sql), stg_gpu_samples, fct_gpu_energy_hourly.
--   Parameters: $day DATE; $max_gap_s, $max_counter_gap_s DOUBLE (warehouse.*, as the day was built).
-- Jobs: those running on $day that started at most models.job_max_days before it, found as the
--   accounts find theirs (models/day_jobs.py), so both split a GPU-hour among the same jobs.
-- Share: over the readings the hour's energy came from (counted), the power each read inside the
--   job's windows times the time it stands for, over the same for the whole hour (a reading
--   without power at the hour's avg_power_w; by count of the counted readings where the hour has
--   no energy). Counted: those of the (host, source) streams
--   fct_gpu_energy_hourly took the hour's minutes from: where sources read the GPU at the same
--   time, the winner's alone; where they followed one another, or the minutes came from several
--   sources (one filled the other's gap), all of them. Its
--   n_samples tells which: the clean readings of all the GPU's streams in the hour, of every host
--   of its source, or of its (host, source) alone; the sets are nested, so the largest of that
--   count is the one. No match (the minutes came from several streams: one filled another's gap,
--   or they overlapped at a switch), or no energy row: per minute, the readings of the stream
--   that read it most densely (as the energy's rate rule; every stream's readings counted a minute
--   both read twice: a 10-minute NVML gap filled by DCGM gave its job 10% for 19%). Before, every source's readings counted,
--   one vote each: NVML all hour and DCGM its second half split two halves at equal power
--   1/3 : 2/3; NVML at 1 Hz, then DCGM every 10 s, 91% : 9%.
-- Time a reading stands for: its interval_s (to its stream's next energy reading) where the
--   energy bridged it: at most max_counter_gap_s from a reading with its counter, max_gap_s from
--   one without (whether the next one has a counter is not read: that takes a sort); otherwise
--   none (a gap, the stream's last reading).
-- A reading inside the windows of several jobs at once (pods sharing a GPU) is split equally
--   among them, so the shares of one GPU-hour never sum to more than 1; what is left is idle.
--   The rows, n_samples and the power limit read every source's clean readings, as before: a job
--   whose window holds only uncounted readings keeps its row, at share 0 (the accounts split an
--   hour where a holding job has no row by time held).
-- columns:
--   day [DATE] UTC day
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   job_id [text] job
--   gpu_uuid [text] GPU
--   n_samples [count] clean readings of the hour in the job's windows (of every source)
--   energy_share_ratio [0..1] the job's share of the GPU-hour's energy
--   energy_kwh [kWh] energy_share_ratio x the GPU-hour's energy_kwh (NULL: no hourly energy)
--   power_limit_w [W] power limit in force (most frequent reading)
--   power_limit_changed [bool] the limit changed within the job's part of the hour
--   measured_s [s] the time of the job's part of the hour its energy stands for: the counted readings'
--     time inside its windows (less than the time it held the GPU where readings were missing;
--     NULL: no hourly energy)
WITH bounds AS (
    SELECT gpu_uuid, a_at AS t_at FROM eff_holdings
    UNION
    SELECT gpu_uuid, b_at FROM eff_holdings
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
    JOIN eff_holdings AS h ON h.gpu_uuid = p.gpu_uuid AND h.a_at <= p.p0_at AND h.b_at >= p.p1_at
),
held_pieces AS (
    SELECT gpu_uuid, p0_at, p1_at, count(*) AS n_holders FROM piece_holders GROUP BY ALL
),
samples AS (
    SELECT host, source, gpu_uuid, sampled_at, date_trunc('hour', sampled_at) AS hour_at,
           epoch_us(sampled_at) // 60000000 AS minute_index,
           CAST(power_w AS DOUBLE) AS power_w, CAST(power_limit_w AS DOUBLE) AS power_limit_w,
           -- the time the reading stands for: up to its stream's next energy reading, where the
           -- energy bridged that (else a gap, or the stream's end: none)
           CASE WHEN interval_s <= CASE WHEN energy_mj_total IS NOT NULL THEN $max_counter_gap_s
                                        ELSE $max_gap_s END
                THEN CAST(interval_s AS DOUBLE) ELSE 0.0 END AS weight_s
    FROM stg_gpu_samples
    WHERE day = $day::DATE
),
stream_counts AS (
    SELECT gpu_uuid, hour_at, host, source, count(*) AS n FROM samples GROUP BY ALL
),
minute_streams AS (
    -- per GPU-minute, its streams by how densely they read it: where the hour's minutes came
    -- from several streams, the densest one's readings stand for the minute
    SELECT gpu_uuid, minute_index, host, source,
           row_number() OVER (PARTITION BY gpu_uuid, minute_index ORDER BY count(*) DESC, source, host) AS density_rank
    FROM samples
    GROUP BY gpu_uuid, minute_index, host, source
),
hour_taken AS (
    -- what fct_gpu_energy_hourly added up for the GPU-hour (its n_samples): all its streams, every
    -- host of its source, or its (host, source) alone; nested, so the set of that count is it
    SELECT c.gpu_uuid, c.hour_at, any_value(e.source) AS source, any_value(e.host) AS host,
           any_value(e.avg_power_w) AS avg_power_w,
           CASE
               WHEN sum(c.n) = any_value(e.n_samples) THEN 'all'
               WHEN sum(c.n) FILTER (WHERE c.source = e.source) = any_value(e.n_samples) THEN 'source'
               WHEN sum(c.n) FILTER (WHERE c.source = e.source AND c.host = e.host) = any_value(e.n_samples)
                    THEN 'stream'
               ELSE 'mixed'  -- minutes from several streams, or no energy row: per minute, its densest stream
           END AS taken
    FROM stream_counts AS c
    LEFT JOIN fct_gpu_energy_hourly AS e
        ON e.gpu_uuid = c.gpu_uuid AND e.hour_at = c.hour_at AND e.day = $day::DATE AND e.n_samples > 0
    GROUP BY c.gpu_uuid, c.hour_at
),
weighed AS (
    SELECT s.* EXCLUDE (power_w),
           -- a reading without power (a counter-only reading, a failed power read) stands for the
           -- hour's average power: counted as 0 W, a job that held the GPU while only the counter
           -- was read got none of the energy the counter measured, and the next job all of it
           coalesce(s.power_w, t.avg_power_w) AS power_w,
           CASE t.taken
               WHEN 'all' THEN true
               WHEN 'mixed' THEN d.density_rank = 1
               WHEN 'source' THEN s.source = t.source
               ELSE s.source = t.source AND s.host = t.host
           END AS counted
    FROM samples AS s
    JOIN hour_taken AS t USING (gpu_uuid, hour_at)
    JOIN minute_streams AS d
        -- a reading with no host (a file another tool wrote) still finds its stream
        ON d.gpu_uuid = s.gpu_uuid AND d.minute_index = s.minute_index AND d.host IS NOT DISTINCT FROM s.host
           AND d.source = s.source
),
hour_weights AS (
    SELECT gpu_uuid, hour_at,
           sum(power_w * weight_s) FILTER (WHERE counted) AS power_sum_ws,
           count(*) FILTER (WHERE counted) AS n
    FROM weighed GROUP BY ALL
),
piece_hour_weights AS (
    SELECT p.gpu_uuid, p.p0_at, s.hour_at, any_value(p.n_holders) AS n_holders,
           sum(s.power_w * s.weight_s) FILTER (WHERE s.counted) AS power_sum_ws,
           sum(s.weight_s) FILTER (WHERE s.counted) AS measured_s,
           count(*) FILTER (WHERE s.counted) AS n_counted,
           count(*) AS n,
           mode(s.power_limit_w) AS power_limit_w,
           min(s.power_limit_w) <> max(s.power_limit_w) AS power_limit_changed
    FROM held_pieces AS p
    JOIN weighed AS s ON s.gpu_uuid = p.gpu_uuid AND s.sampled_at >= p.p0_at AND s.sampled_at < p.p1_at
    GROUP BY p.gpu_uuid, p.p0_at, s.hour_at
),
job_hour_weights AS (
    SELECT ph.job_id, ph.gpu_uuid, w.hour_at,
           sum(w.power_sum_ws / w.n_holders) AS power_sum_ws,
           sum(w.measured_s) AS measured_s,  -- a job sharing the GPU held all of it: not split
           sum(w.n_counted / w.n_holders) AS n_share,
           sum(w.n) AS n,
           arg_max(w.power_limit_w, w.n) AS power_limit_w,
           bool_or(w.power_limit_changed) OR count(DISTINCT w.power_limit_w) > 1 AS power_limit_changed
    FROM piece_holders AS ph
    JOIN piece_hour_weights AS w USING (gpu_uuid, p0_at)
    GROUP BY ALL
),
shares AS (
    SELECT jh.job_id, jh.gpu_uuid, jh.hour_at, jh.n, jh.power_limit_w, jh.power_limit_changed, jh.measured_s,
           CASE WHEN hw.power_sum_ws > 0 THEN coalesce(jh.power_sum_ws, 0) / hw.power_sum_ws
                WHEN hw.n > 0 THEN jh.n_share / hw.n
                ELSE 0.0 END AS energy_share_ratio
    FROM job_hour_weights AS jh
    JOIN hour_weights AS hw USING (gpu_uuid, hour_at)
)
SELECT
    $day::DATE AS day,
    s.hour_at,
    s.job_id,
    s.gpu_uuid,
    s.n AS n_samples,
    s.energy_share_ratio,
    e.energy_kwh * s.energy_share_ratio AS energy_kwh,
    s.power_limit_w,
    s.power_limit_changed,
    CASE WHEN e.energy_kwh IS NOT NULL THEN coalesce(s.measured_s, 0.0) END AS measured_s  -- NULL: no energy
FROM shares AS s
LEFT JOIN fct_gpu_energy_hourly AS e
    ON e.gpu_uuid = s.gpu_uuid AND e.hour_at = s.hour_at AND e.day = $day::DATE
