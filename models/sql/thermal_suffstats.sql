-- thermal_suffstats: sufficient statistics of each GPU's first-order thermal model on one day.
-- Model: chip temperature relaxes towards T_inlet + theta*P with time constant tau; sampled every
-- dt it is the regression  y_t = b0 + b1*y_prev + b2*p2 + b3*p3, where y = T - T_inlet when
-- the inlet is measured (node_samples), else y = T (and b0/(1-b1) estimates the inlet);
-- theta = (b2 + b3)/(1-b1) C/W, tau = -dt/ln(b1) s. The temperature at a sample answers to the
-- power over the whole step before it (p2, p3 below): with P_t alone, power that moved between
-- 30 s samples gave theta +26% or -40% and tau 2.3x.
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
-- Power over the step: where the stream carries the energy counter (NVML's and DCGM's total energy,
-- mJ), p2 is its rise over the step over dt (the step's mean power) and p3 the end's reading;
-- else p2 = P_t and p3 = P_prev, the step's two ends. Two instants miss what the power did between
-- them: 16 simulated GPUs on training steps of seconds, read every 10, 30 or 60 s, gave tau +130%
-- to +220% on average (one GPU 6.8x) and theta -2% to -5%; the counter's mean gives tau -2% to
-- -10% (every GPU within -24%..+4%) and theta -1%. A GPU takes the counter when at least half its
-- steps have a rise (> 0 mJ: a repeated counter is a reading that did not refresh, a fall a
-- reset); its steps without one are then left out, never mixed with the two-reading form.
-- Columns: host, gpu_uuid, gpu_model, n, inlet_measured (bool), on_energy_counter (bool),
--   interval_s (s, median gap), mean_inlet_c (C, NULL when not measured), mean_power_w (W),
--   s_* sums of products of x (above) and y; s_y_y (C^2) the sum of y^2, for the residual variance
--   that tau's standard error takes.
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
           CASE WHEN isfinite(g.energy_mj_total) THEN CAST(g.energy_mj_total AS DOUBLE) END AS energy_mj_total,
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
        epoch(sampled_at) - epoch(lag(sampled_at) OVER w) AS gap_s,
        CASE WHEN energy_mj_total > lag(energy_mj_total) OVER w
             THEN (energy_mj_total - lag(energy_mj_total) OVER w) / 1000.0
                  / (epoch(sampled_at) - epoch(lag(sampled_at) OVER w)) END AS step_power_w
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
),
even_steps AS (
    SELECT * FROM steps JOIN intervals USING (gpu_uuid)
    WHERE abs(gap_s - interval_s) <= 0.25 * interval_s
),
power_basis AS (
    SELECT gpu_uuid, count(step_power_w) >= 0.5 * count(*) AS on_energy_counter FROM even_steps GROUP BY gpu_uuid
),
regressors AS (
    SELECT s.*, b.on_energy_counter,
           CASE WHEN b.on_energy_counter THEN s.step_power_w ELSE s.power_w END AS p2,
           CASE WHEN b.on_energy_counter THEN s.power_w ELSE s.power_prev_w END AS p3
    FROM even_steps AS s JOIN power_basis AS b USING (gpu_uuid)
    WHERE NOT b.on_energy_counter OR s.step_power_w IS NOT NULL
)
SELECT
    host, gpu_uuid, any_value(gpu_model) AS gpu_model,
    count(*) AS n,
    bool_and(inlet_measured) AS inlet_measured,
    bool_and(on_energy_counter) AS on_energy_counter,
    any_value(interval_s) AS interval_s,
    CASE WHEN bool_and(inlet_measured) THEN avg(inlet_temp_c) END AS mean_inlet_c,
    avg(power_w) AS mean_power_w,
    sum(y_prev) AS s_0_1, sum(p2) AS s_0_2, sum(p3) AS s_0_3,
    sum(y_prev * y_prev) AS s_1_1, sum(y_prev * p2) AS s_1_2, sum(y_prev * p3) AS s_1_3,
    sum(p2 * p2) AS s_2_2, sum(p2 * p3) AS s_2_3, sum(p3 * p3) AS s_3_3,
    sum(y) AS s_0_y, sum(y_prev * y) AS s_1_y, sum(p2 * y) AS s_2_y, sum(p3 * y) AS s_3_y,
    sum(y * y) AS s_y_y
FROM regressors
GROUP BY host, gpu_uuid
ORDER BY host, gpu_uuid
