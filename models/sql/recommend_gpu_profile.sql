-- recommend_gpu_profile: what each GPU did on one day, for choosing its power limit.
-- Grain: gpu_uuid, rows of `reco_input_samples` (temp view over gpu_activity_samples: one activity
--   stream per GPU and day) with day = $day.
-- Parameters: $day DATE; $sm_active_models, $util_gpu_models VARCHAR[]: the GPU models whose power
--   fit reads DCGM's SM activity (feature set 'dcgm') and NVML's utilisation ('nvml')
--   (fit_activity_kind.sql and activity_of_kind.sql: macros models.activity creates).
-- Input besides: the macro covered_hours (covered_hours.sql) and its temp view
--   covered_hours_input_coverage (models.recommend_inputs.create_covered_hours_inputs).
-- Columns: host, gpu_uuid, gpu_model, n_samples, busy_ratio (0..1, share of the samples with an
--   activity reading whose activity is above 5%; NULL: no reading), busy_hours (h: busy_ratio x the
--   hours the day's samples cover, covered_hours.sql: from the first reading
--   to the last, or the seconds the warehouse's energy covered where fct_gpu_coverage_daily says
--   fewer; a GPU read 00:00-01:00 and 23:00-24:00 was busy 15.5 h by the span where its readings
--   held 1.3 h, and its kWh saving was 12x what they support),
--   activity_ratio (0..1, busy mean of the stream's activity_ratio, which also decides what is
--   busy), activity_deciles (0..1, list of the mean activity of each tenth of the busy samples,
--   lowest first, in the measure the GPU model's fit reads, whichever the stream's is: a GPU fitted
--   on NVML's utilisation scored on tenths of SM activity, rescaled to the utilisation's mean, was
--   promised 8.6% where its own tenths give 12.2%; NVML reads ~100% whenever a kernel runs, so no
--   one scale maps the one onto the other), deciles_activity_kind ('sm_active' | 'util_gpu': that
--   measure; the stream's activity_kind for a model without a fit; NULL without tenths),
--   locked_share_deciles (0..1, per tenth: share of its samples whose SM
--   clocks an application lock held, clock event reason bit 0x2), locked_clock_mhz_deciles (MHz, per
--   tenth: mean SM clock of those locked samples; NULL when none), memory_deciles (0..1, per tenth:
--   mean memory activity in the measure paired with the tenths' activity, DRAM activity for SM
--   activity, NVML memory utilisation for utilisation), pcie_gbps_deciles (GB/s), temp_c_deciles (C)
--   (each the mean of the tenth's samples that read it; NULL where none did: a phase's own
--   bottleneck decides what a cap costs it, and at the day's means an H200's memory-bound tenths
--   read as compute-bound: 350 W promised 7.8% and 2.9% slower where its samples give 12.6% and
--   2.1%), dram_ratio, util_mem_ratio (0..1, means over busy samples), pcie_gbps (GB/s, busy
--   mean), temp_c (C, busy mean), busy_power_w (W, busy mean), max_power_limit_w (W: the highest
--   positive limit the GPU was read at in at least 1% of its readings with one and in at least 5 of
--   them, or its most-read limit where none was read that often; NULL: no positive limit read. 1% is
--   15 minutes of a day read throughout: a board's own limit held until the agent set a cap still
--   counts, a few corrupt readings do not. Its
--   highest reading became its default and maximum: one mistyped 4000 W among an imported log's
--   2,160 readings made an A100's "keep the default" 4000 W, its cap floor 2000 W, and its saving
--   was counted from a run without a limit), stray_max_power_limit_w (W: the highest limit read above
--   max_power_limit_w, set aside as too rarely read; NULL: none), n_stray_power_limit_readings (the
--   readings of limits above max_power_limit_w, set aside; 0: none);
--   power_limit_default_w, power_limit_min_w, power_limit_max_w (W: the limits the device itself
--   reported that day, fct_gpu_coverage_daily's; NULL: none reported, or no coverage built);
--   model_dram_ratio, model_util_mem_ratio, model_pcie_gbps, model_temp_c: the mean of those busy
--   means over the GPUs of the GPU's model that read each that day, each GPU weighing the same
--   whatever its sampling rate or busy hours (the stand-in describes a GPU of the model; NULL where
--   none read it, or the model is not named), what models.recommend puts in for a GPU that read none. The 95th
--   percentile of power is recommend_gpu_peak_power, run only when a reason needs it.
-- The tenths come from a histogram of activity per GPU (bins 0.002 wide, each with its count, sum
-- and locked samples), not from sorting the day's rows: a tenth takes whole bins, and of the bins
-- at its edges the share that falls inside it at the bin's mean (so a tenth's mean activity is
-- within 0.002 of the exact one, and its locked share is exact but for the edge bins, whose locked
-- samples are split pro rata). Tenths are sized as ntile(10) sizes them (the first n % 10 hold one
-- more); a GPU with fewer than 10 busy samples that read the tenths' measure gets no tenths.
WITH day_rows AS NOT MATERIALIZED (
    SELECT *, activity_ratio AS activity
    FROM reco_input_samples
    WHERE day = $day AND power_w IS NOT NULL
),
per_gpu_and_busy AS (
    -- Sums and counts with busy as a key: one grouping, no FILTER per aggregate (3x cheaper).
    SELECT
        host, gpu_uuid, activity > 0.05 AS busy, power_limit_w,  -- busy NULL: no activity reading
        any_value(gpu_model) AS gpu_model,
        count(*) AS n, min(sampled_at) AS first_at, max(sampled_at) AS last_at,
        sum(activity) AS activity_sum, count(activity) AS activity_n,
        sum(sm_active_ratio) AS sm_active_sum, count(sm_active_ratio) AS sm_active_n,
        sum(util_gpu_pct) AS util_gpu_pct_sum, count(util_gpu_pct) AS util_gpu_n,
        sum(dram_active_ratio) AS dram_sum, count(dram_active_ratio) AS dram_n,
        sum(util_mem_pct) AS util_mem_pct_sum, count(util_mem_pct) AS util_mem_n,
        sum((pcie_tx_bytes_per_s + pcie_rx_bytes_per_s) / 1e9) AS pcie_gb_per_s_sum,
        count(pcie_tx_bytes_per_s + pcie_rx_bytes_per_s) AS pcie_n,  -- tx without rx is no reading, not rx = 0
        sum(temp_c) AS temp_c_sum, count(temp_c) AS temp_n,
        sum(power_w) AS power_w_sum, count(power_w) AS power_n
    FROM day_rows
    -- the limit as a key too: a GPU holds one or two limits a day, so the groups stay few and the
    -- day's rows are read once for the limits' counts as well
    GROUP BY host, gpu_uuid, busy, power_limit_w
),
limit_counts AS (
    SELECT gpu_uuid, power_limit_w, sum(n) AS n_readings,
           sum(sum(n)) OVER (PARTITION BY gpu_uuid) AS n_limit_readings,
           max(sum(n)) OVER (PARTITION BY gpu_uuid) AS n_most_read
    FROM per_gpu_and_busy
    WHERE power_limit_w > 0  -- 0 or below: the warehouse's "no limit known"
    GROUP BY gpu_uuid, power_limit_w
),
held_limits AS (
    -- A limit is the GPU's when it held it a while: a board built for more (a 500 W HGX A100 with the
    -- 400 W board's NVML name) reads its own limit all day, a corrupt reading once.
    SELECT gpu_uuid,
           max(power_limit_w) FILTER (
               WHERE n_readings >= least(n_most_read, greatest(0.01 * n_limit_readings, 5))) AS max_power_limit_w
    FROM limit_counts
    GROUP BY gpu_uuid
),
limits AS (
    SELECT h.gpu_uuid, h.max_power_limit_w,
           max(c.power_limit_w) FILTER (WHERE c.power_limit_w > h.max_power_limit_w) AS stray_max_power_limit_w,
           coalesce(sum(c.n_readings) FILTER (WHERE c.power_limit_w > h.max_power_limit_w), 0) AS n_stray_power_limit_readings
    FROM held_limits AS h
    JOIN limit_counts AS c USING (gpu_uuid)
    GROUP BY h.gpu_uuid, h.max_power_limit_w
),
per_gpu AS (
    SELECT
        host, gpu_uuid, any_value(gpu_model) AS gpu_model,
        sum(n) AS n_samples, min(first_at) AS first_at, max(last_at) AS last_at,
        -- of the samples with an activity reading: a sample without one is unknown, not idle (a
        -- profiler holding DCGM's SM activity for 45% of a busy day made its GPU 'background',
        -- busy 2.3 h instead of 4.8 h, and capped it for the 25% bound); NULL where none has one
        coalesce(sum(n) FILTER (WHERE busy), 0) / nullif(sum(n) FILTER (WHERE busy IS NOT NULL), 0) AS busy_ratio,
        sum(activity_sum) FILTER (WHERE busy) / sum(activity_n) FILTER (WHERE busy) AS activity_ratio,
        sum(sm_active_sum) FILTER (WHERE busy) / sum(sm_active_n) FILTER (WHERE busy) AS sm_active_ratio,
        sum(util_gpu_pct_sum) FILTER (WHERE busy) / sum(util_gpu_n) FILTER (WHERE busy) / 100.0 AS util_gpu_ratio,
        sum(dram_sum) FILTER (WHERE busy) / sum(dram_n) FILTER (WHERE busy) AS dram_ratio,
        sum(util_mem_pct_sum) FILTER (WHERE busy) / sum(util_mem_n) FILTER (WHERE busy) / 100.0 AS util_mem_ratio,
        sum(pcie_gb_per_s_sum) FILTER (WHERE busy) / sum(pcie_n) FILTER (WHERE busy) AS pcie_gbps,
        sum(temp_c_sum) FILTER (WHERE busy) / sum(temp_n) FILTER (WHERE busy) AS temp_c,
        sum(power_w_sum) FILTER (WHERE busy) / sum(power_n) FILTER (WHERE busy) AS busy_power_w
    FROM per_gpu_and_busy
    GROUP BY host, gpu_uuid
),
per_model AS (
    -- Each GPU's busy mean counts once (avg skips a GPU that read none): pooling samples made a
    -- GPU read at 1 Hz count 15 times one read every 15 s, so the stand-in told sampling rates apart.
    SELECT
        gpu_model,
        avg(dram_ratio) AS model_dram_ratio,
        avg(util_mem_ratio) AS model_util_mem_ratio,
        avg(pcie_gbps) AS model_pcie_gbps,
        avg(temp_c) AS model_temp_c
    FROM per_gpu
    WHERE gpu_model IS NOT NULL
    GROUP BY gpu_model
),
deciles_rows AS NOT MATERIALIZED (
    -- The busy samples (busy by the stream's activity, as busy_ratio counts them), each with the
    -- activity its model's fit reads (the stream's where the model has none) as deciles_activity.
    SELECT gpu_uuid, clock_event_reasons, sm_clock_mhz, kind,
           activity_of_kind(kind, sm_active_ratio, util_gpu_pct) AS deciles_activity,
           activity_of_kind(kind, dram_active_ratio, util_mem_pct) AS memory,
           (pcie_tx_bytes_per_s + pcie_rx_bytes_per_s) / 1e9 AS pcie_gbps, temp_c
    FROM (SELECT *, fit_activity_kind(gpu_model, activity_kind, $sm_active_models, $util_gpu_models) AS kind
          FROM day_rows WHERE activity > 0.05)
),
histogram AS (
    -- least(): unchecked input (NaN, ratios above 1) shares the top bin rather than overflow the index.
    SELECT gpu_uuid, CAST(floor(least(deciles_activity, 1.0) * 500) AS BIGINT) AS bin,
           any_value(kind) AS kind, count(*) AS n, sum(deciles_activity) AS activity_sum,
           -- CASE, not FILTER: DuckDB's filtered aggregates cost ~2x here.
           sum(CASE WHEN (clock_event_reasons & 2) <> 0 AND sm_clock_mhz IS NOT NULL THEN 1 ELSE 0 END) AS n_locked,
           sum(CASE WHEN (clock_event_reasons & 2) <> 0 THEN sm_clock_mhz END) AS locked_clock_mhz_sum,
           sum(memory) AS memory_sum, count(memory) AS memory_n, sum(pcie_gbps) AS pcie_gbps_sum,
           count(pcie_gbps) AS pcie_n, sum(temp_c) AS temp_c_sum, count(temp_c) AS temp_n
    FROM deciles_rows WHERE deciles_activity IS NOT NULL
    GROUP BY gpu_uuid, bin
),
ranked AS (
    -- Each bin holds the busy samples of 0-based ranks [first_rank, first_rank + n) in activity order.
    SELECT *, sum(n) OVER (PARTITION BY gpu_uuid ORDER BY bin) - n AS first_rank,
           sum(n) OVER (PARTITION BY gpu_uuid) AS n_busy
    FROM histogram
),
tenth_edges AS (
    SELECT gpu_uuid, tenth,
           tenth * (n_busy // 10) + least(tenth, n_busy % 10) AS first_rank,
           (tenth + 1) * (n_busy // 10) + least(tenth + 1, n_busy % 10) AS end_rank
    FROM (SELECT DISTINCT gpu_uuid, n_busy FROM ranked), range(10) AS t(tenth)
),
pieces AS (
    -- The part of each bin inside each tenth: k of its n samples, taken at the bin's means.
    SELECT e.gpu_uuid, e.tenth, r.kind, r.n, r.activity_sum, r.n_locked, r.locked_clock_mhz_sum, r.memory_sum,
           r.memory_n, r.pcie_gbps_sum, r.pcie_n, r.temp_c_sum, r.temp_n,
           least(r.first_rank + r.n, e.end_rank) - greatest(r.first_rank, e.first_rank) AS k
    FROM tenth_edges AS e
    JOIN ranked AS r ON r.gpu_uuid = e.gpu_uuid
        AND r.first_rank < e.end_rank AND r.first_rank + r.n > e.first_rank
),
per_tenth AS (
    SELECT gpu_uuid, tenth, any_value(kind) AS kind,
           sum(k * activity_sum / n) / sum(k) AS activity,
           sum(k * n_locked / n) / sum(k) AS locked_share,
           sum(k * locked_clock_mhz_sum / n) / nullif(sum(k * n_locked / n), 0) AS locked_clock_mhz,
           sum(k * memory_sum / n) / nullif(sum(k * memory_n / n), 0) AS memory,
           sum(k * pcie_gbps_sum / n) / nullif(sum(k * pcie_n / n), 0) AS pcie_gbps,
           sum(k * temp_c_sum / n) / nullif(sum(k * temp_n / n), 0) AS temp_c
    FROM pieces GROUP BY gpu_uuid, tenth
),
tenths AS (
    SELECT gpu_uuid, list(activity ORDER BY tenth) AS activity_deciles, any_value(kind) AS deciles_activity_kind,
           list(locked_share ORDER BY tenth) AS locked_share_deciles,
           list(locked_clock_mhz ORDER BY tenth) AS locked_clock_mhz_deciles,
           list(memory ORDER BY tenth) AS memory_deciles, list(pcie_gbps ORDER BY tenth) AS pcie_gbps_deciles,
           list(temp_c ORDER BY tenth) AS temp_c_deciles
    FROM per_tenth GROUP BY gpu_uuid HAVING count(*) = 10
)
SELECT
    g.host, g.gpu_uuid, g.gpu_model, g.n_samples, g.busy_ratio,
    g.busy_ratio * covered_hours(g.first_at, g.last_at, c.covered_s) AS busy_hours,
    g.activity_ratio, t.activity_deciles, t.deciles_activity_kind, t.locked_share_deciles, t.locked_clock_mhz_deciles,
    t.memory_deciles, t.pcie_gbps_deciles, t.temp_c_deciles,
    g.sm_active_ratio, g.util_gpu_ratio, g.dram_ratio, g.util_mem_ratio, g.pcie_gbps, g.temp_c,
    g.busy_power_w, l.max_power_limit_w, l.stray_max_power_limit_w,
    coalesce(l.n_stray_power_limit_readings, 0) AS n_stray_power_limit_readings,
    m.model_dram_ratio, m.model_util_mem_ratio, m.model_pcie_gbps, m.model_temp_c,
    c.power_limit_default_w, c.power_limit_min_w, c.power_limit_max_w
FROM per_gpu AS g
LEFT JOIN tenths AS t USING (gpu_uuid)
LEFT JOIN limits AS l USING (gpu_uuid)
LEFT JOIN per_model AS m ON m.gpu_model = g.gpu_model
LEFT JOIN covered_hours_input_coverage AS c ON c.day = $day AND c.gpu_uuid = g.gpu_uuid
ORDER BY g.host, g.gpu_uuid
