-- thermal_suffstats: sufficient statistics of each GPU's first-order thermal model on one day.
-- Model: chip temperature relaxes towards T_inlet + theta*P with time constant tau; sampled every
-- dt it is the regression  y_t = b0 + b1*y_prev + b2*P_t + b3*P_prev, where y = T - T_inlet when
-- the inlet is measured (node_samples), else y = T (and b0/(1-b1) estimates the inlet);
-- theta = (b2 + b3)/(1-b1) C/W, tau = -dt/ln(b1) s. The temperature at a sample answers to the
-- power over the whole step before it, which its two ends bracket: with P_t alone, power that
-- moved between 30 s samples gave theta +26% or -40% and tau 2.3x.
-- Grain: gpu_uuid, samples of `thermal_input_samples` on $day whose previous sample (of the same
-- source, its temperature and power read) is one sampling interval earlier (within a quarter of
-- the GPU's median step, and at most $max_gap_s): the regression's step is that interval, and a
-- step over a reading lost or unread (twice or three times as long) had biased tau by -28% at 30%
-- of readings missing. Of a GPU read by several sources (NVML every 10 s, DCGM every 30 s) only the
-- one with the most samples.
-- Inlet: `thermal_input_inlet` (host, sampled_at, inlet_temp_c; may be empty), the host's last
-- reading at or before the sample and at most $max_inlet_age_s old. The inlet counts as measured
-- for a GPU only when every one of its samples has one: y mixing T - T_inlet and T in one
-- regression fits neither (a host whose BMC readings start at noon gave theta 4x the truth).
-- Cost: the inlet is looked up once per host and sampling time (inlet_at: a host's GPUs share
-- their times), not once per GPU sample, and inlet_measured is a GROUP BY, not a window over all
-- samples: both gave the same rows at a third of the CPU (2.0 s instead of 3.3 s per 32-GPU day).
-- Columns: host, gpu_uuid, gpu_model, n, inlet_measured (bool), interval_s (s, median gap),
--   mean_inlet_c (C, NULL when not measured), mean_power_w (W), s_* sums of products of
--   x = (1, y_prev, p, p_prev) and y.
WITH sample_times AS (
    SELECT DISTINCT host, sampled_at AS at FROM thermal_input_samples
    WHERE day = $day
),
inlet_at AS (
    SELECT t.host, t.at, i.sampled_at, i.inlet_temp_c
    FROM sample_times AS t
    ASOF LEFT JOIN thermal_input_inlet AS i ON t.host = i.host AND t.at >= i.sampled_at
),
joined AS (
    -- a NaN or infinite reading is none (a relation the build did not check): in the sums it made
    -- the GPU's NaN and dropped it unsaid
    SELECT g.host, g.gpu_uuid, g.gpu_model, g.source, g.sampled_at,
           CASE WHEN isfinite(g.temp_c) THEN CAST(g.temp_c AS DOUBLE) END AS temp_c,
           CASE WHEN isfinite(g.power_w) THEN CAST(g.power_w AS DOUBLE) END AS power_w,
           CASE WHEN epoch(g.sampled_at) - epoch(i.sampled_at) <= $max_inlet_age_s THEN i.inlet_temp_c END AS inlet_temp_c
    FROM thermal_input_samples AS g
    LEFT JOIN inlet_at AS i ON g.host = i.host AND g.sampled_at = i.at
    WHERE g.day = $day
),
densest AS (
    SELECT gpu_uuid, first(source ORDER BY n DESC, source) AS source
    FROM (SELECT gpu_uuid, source, count(*) AS n FROM joined WHERE temp_c IS NOT NULL AND power_w IS NOT NULL
          GROUP BY gpu_uuid, source)
    GROUP BY gpu_uuid
),
densest_rows AS (
    SELECT j.* FROM joined AS j SEMI JOIN densest AS d ON j.gpu_uuid = d.gpu_uuid AND j.source IS NOT DISTINCT FROM d.source
),
measured AS (
    SELECT gpu_uuid, bool_and(inlet_temp_c IS NOT NULL) FILTER (WHERE temp_c IS NOT NULL AND power_w IS NOT NULL)
               AS inlet_measured
    FROM densest_rows GROUP BY gpu_uuid
),
day_rows AS (
    SELECT r.*, m.inlet_measured FROM densest_rows AS r JOIN measured AS m USING (gpu_uuid)
),
with_prev AS (
    -- over every reading of the stream, so a step whose start was not read has no y_prev
    SELECT *,
        temp_c - CASE WHEN inlet_measured THEN inlet_temp_c ELSE 0.0 END AS y,
        lag(temp_c) OVER w - CASE WHEN inlet_measured THEN inlet_temp_c ELSE 0.0 END AS y_prev,
        lag(power_w) OVER w AS power_prev_w,
        epoch(sampled_at) - epoch(lag(sampled_at) OVER w) AS gap_s
    FROM day_rows
    WINDOW w AS (PARTITION BY gpu_uuid ORDER BY sampled_at)
),
steps AS (
    SELECT * FROM with_prev
    WHERE y IS NOT NULL AND y_prev IS NOT NULL AND power_w IS NOT NULL AND power_prev_w IS NOT NULL
      AND gap_s <= $max_gap_s
),
intervals AS (
    SELECT gpu_uuid, median(gap_s) AS interval_s FROM steps GROUP BY gpu_uuid
)
SELECT
    host, gpu_uuid, any_value(gpu_model) AS gpu_model,
    count(*) AS n,
    bool_and(inlet_measured) AS inlet_measured,
    any_value(interval_s) AS interval_s,
    CASE WHEN bool_and(inlet_measured) THEN avg(inlet_temp_c) END AS mean_inlet_c,
    avg(power_w) AS mean_power_w,
    sum(y_prev) AS s_0_1, sum(power_w) AS s_0_2, sum(power_prev_w) AS s_0_3,
    sum(y_prev * y_prev) AS s_1_1, sum(y_prev * power_w) AS s_1_2, sum(y_prev * power_prev_w) AS s_1_3,
    sum(power_w * power_w) AS s_2_2, sum(power_w * power_prev_w) AS s_2_3, sum(power_prev_w * power_prev_w) AS s_3_3,
    sum(y) AS s_0_y, sum(y_prev * y) AS s_1_y, sum(power_w * y) AS s_2_y, sum(power_prev_w * y) AS s_3_y
FROM steps JOIN intervals USING (gpu_uuid)
WHERE abs(gap_s - interval_s) <= 0.25 * interval_s
GROUP BY host, gpu_uuid
ORDER BY host, gpu_uuid
