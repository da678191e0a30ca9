-- fct_gpu_coverage_daily: how completely each GPU was observed during the day.
-- kind: day
-- grain: one row per (day, gpu_uuid) with any raw reading that day
-- columns:
--   day [DATE] UTC day
--   host [text] server
--   gpu_uuid [text] GPU
--   gpu_index [int] index on the host (the lowest the day's readings gave); dim_gpu takes the latest day's
--   gpu_model [text] NVML name
--   in_inventory [bool] the GPU is in the site inventory
--   n_samples [count] clean readings (all sources)
--   n_quarantined [count] readings sent to quarantine_gpu_samples
--   first_sampled_at [TIMESTAMPTZ, UTC] first clean reading of the day
--   last_sampled_at [TIMESTAMPTZ, UTC] last clean reading of the day
--   last_energy_reading_at [TIMESTAMPTZ, UTC] last clean reading with power or counter of the day
--   covered_s [s] seconds of the day covered in fct_gpu_energy_hourly
--   coverage_ratio [0..1] covered_s / 86400
--   energy_kwh [kWh] sum of fct_gpu_energy_hourly.energy_kwh
--   n_gaps [count] intervals between consecutive clean readings with power or counter (any source)
--     longer than max_gap_s that end on the day: each gap is counted once, on the day of the
--     reading that ends it (a silence from 23:30 to 00:30 is the next day's; this day's
--     staleness_s shows its start). Where the day's first such reading has none before it in the
--     build's margin, the one before is the latest last_energy_reading_at of the earlier days
--     built (earlier_gpu_coverage); before, a gap across midnight longer than the margin was
--     counted on neither day
--   longest_gap_s [s] longest such interval (NULL when none)
--   staleness_s [s] from the last clean reading to the end of the day (or to build time, if earlier)
--   power_limit_default_w [W] the default power limit the device itself reports (NVML), the
--     highest of the day's readings; NULL where none reported one (DCGM, nvidia-smi logs without power.default_limit).
--     Unlike power_limit_w it stays the board's own while a cap holds
--   power_limit_min_w [W] the lowest limit the device accepts, as it reports it (highest of the day's; NULL: none)
--   power_limit_max_w [W] the highest limit the device accepts, as it reports it (highest of the day's; NULL: none)
WITH day_rows AS (
    SELECT * FROM int_gpu_samples_checked WHERE day = $day::DATE
),
per_gpu AS (
    SELECT
        gpu_uuid,
        max(host) AS host,
        min(gpu_index) AS gpu_index,
        max(gpu_model) AS gpu_model,
        bool_or(in_inventory) AS in_inventory,
        count(*) FILTER (WHERE reason IS NULL) AS n_samples,
        count(*) FILTER (WHERE reason IS NOT NULL) AS n_quarantined,
        min(sampled_at) FILTER (WHERE reason IS NULL) AS first_sampled_at,
        max(sampled_at) FILTER (WHERE reason IS NULL) AS last_sampled_at,
        max(sampled_at) FILTER (WHERE reason IS NULL AND (power_w IS NOT NULL OR energy_mj_total IS NOT NULL))
            AS last_energy_reading_at
    FROM day_rows
    GROUP BY gpu_uuid
),
device_limits AS (
    -- the device's own limits from the day's files, four narrow columns of the batch's hosts: carried
    -- through the checked step with every reading they cost the build 3% (0.26 of 8.5 s, 64-GPU day),
    -- read here on their own 0.06-0.08 s
    SELECT gpu_uuid, max(power_limit_default_w) AS power_limit_default_w, max(power_limit_min_w) AS power_limit_min_w,
           max(power_limit_max_w) AS power_limit_max_w
    FROM raw_gpu_samples
    WHERE date = $day::DATE AND list_contains($hosts::VARCHAR[], coalesce(host, ''))
    GROUP BY gpu_uuid
),
streams AS (
    -- the GPU's streams (a few per GPU, so a small hash table), counted: cheaper than the string
    -- min() and max() of every reading's host and source (0.66-0.72 -> 0.55-0.63 s, 64-GPU day);
    -- in the same scan, its first reading with power or counter in the build's window
    SELECT gpu_uuid, count(*) = 1 AS is_single, min(first_energy_at) AS first_energy_at
    FROM (
        SELECT gpu_uuid, host, source,
               min(sampled_at) FILTER (WHERE power_w IS NOT NULL OR energy_mj_total IS NOT NULL) AS first_energy_at
        FROM int_gpu_samples_checked
        WHERE reason IS NULL
        GROUP BY gpu_uuid, host, source
    )
    GROUP BY gpu_uuid
),
single_stream_steps AS (
    -- a GPU read by one stream: the step to its next reading is paired already (no sort here)
    SELECT c.gpu_uuid, epoch_us(c.next_sampled_at) AS t_us,
           (epoch_us(c.next_sampled_at) - epoch_us(c.sampled_at)) / 1e6 AS step_s
    FROM int_gpu_samples_checked AS c
    SEMI JOIN streams AS s ON s.gpu_uuid = c.gpu_uuid AND s.is_single
    WHERE c.next_sampled_at IS NOT NULL
),
instants AS (
    -- a GPU read by several streams (NVML and DCGM, two hosts): a gap is a time no stream read,
    -- so its readings are merged in time order. Every clean reading, not DISTINCT instants: a
    -- reading at an instant already seen follows it with a step of 0, which is never a gap.
    SELECT c.gpu_uuid, epoch_us(c.sampled_at) AS t_us
    FROM int_gpu_samples_checked AS c
    SEMI JOIN streams AS s ON s.gpu_uuid = c.gpu_uuid AND NOT s.is_single
    WHERE c.reason IS NULL AND (c.power_w IS NOT NULL OR c.energy_mj_total IS NOT NULL)
),
first_readings AS (
    -- GPUs whose first reading with power or counter is on the day itself, none in the margin
    -- before it: the reading before lies outside the window (an outage across midnight)
    SELECT gpu_uuid, first_energy_at AS first_at
    FROM streams
    WHERE first_energy_at >= $day::TIMESTAMPTZ
),
earlier_readings AS (
    -- their last such reading before the day, from the earlier days' rows of this table (one per
    -- GPU and day: an outage of any length costs nothing to measure; a day rebuilt later reads
    -- the days before it, whatever the order of the builds)
    SELECT c.gpu_uuid, max(c.last_reading_at) AS previous_at
    FROM earlier_gpu_coverage AS c
    SEMI JOIN first_readings AS f USING (gpu_uuid)
    WHERE c.day < $day::DATE
    GROUP BY c.gpu_uuid
),
steps AS (
    SELECT gpu_uuid, t_us, (t_us - lag(t_us) OVER (PARTITION BY gpu_uuid ORDER BY t_us)) / 1e6 AS step_s
    FROM instants
    UNION ALL
    SELECT gpu_uuid, t_us, step_s FROM single_stream_steps
    UNION ALL
    SELECT f.gpu_uuid, epoch_us(f.first_at), (epoch_us(f.first_at) - epoch_us(e.previous_at)) / 1e6
    FROM first_readings AS f
    JOIN earlier_readings AS e USING (gpu_uuid)
),
gaps AS (
    SELECT gpu_uuid, count(*) AS n_gaps, max(step_s) AS longest_gap_s
    FROM steps
    WHERE step_s > 0 AND step_s > $max_gap_s
      -- the gap's end on the day: counted once, on one day
      AND t_us >= epoch_us($day::TIMESTAMPTZ)
      AND t_us < epoch_us(($day::DATE + 1)::TIMESTAMPTZ)
    GROUP BY gpu_uuid
),
energy AS (
    -- added in hour order: the same sum whatever order the hourly rows were stored in
    SELECT gpu_uuid, sum(coverage_ratio * 3600 ORDER BY hour_at) AS covered_s,
           sum(energy_kwh ORDER BY hour_at) AS energy_kwh
    FROM fct_gpu_energy_hourly
    WHERE day = $day::DATE
    GROUP BY gpu_uuid
)
SELECT
    $day::DATE AS day,
    p.host,
    p.gpu_uuid,
    p.gpu_index,
    p.gpu_model,
    p.in_inventory,
    p.n_samples,
    p.n_quarantined,
    p.first_sampled_at,
    p.last_sampled_at,
    p.last_energy_reading_at,
    coalesce(e.covered_s, 0) AS covered_s,
    coalesce(e.covered_s, 0) / 86400 AS coverage_ratio,
    e.energy_kwh,
    coalesce(g.n_gaps, 0) AS n_gaps,
    g.longest_gap_s,
    greatest(
        0,
        epoch(least(($day::DATE + 1)::TIMESTAMPTZ, $now::TIMESTAMPTZ))
        - epoch(coalesce(p.last_sampled_at, $day::TIMESTAMPTZ))
    ) AS staleness_s,
    d.power_limit_default_w,
    d.power_limit_min_w,
    d.power_limit_max_w
FROM per_gpu AS p
LEFT JOIN device_limits AS d USING (gpu_uuid)
LEFT JOIN energy AS e USING (gpu_uuid)
LEFT JOIN gaps AS g USING (gpu_uuid)
