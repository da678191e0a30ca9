-- thermal_suffstats: sufficient statistics of each GPU's first-order thermal model on one day.
-- Model: chip temperature relaxes towards T_inlet + theta*P with time constant tau; sampled every
-- dt it is the AR(1) regression  y_t = b0 + b1*y_prev + b2*P_t, where y = T - T_inlet when the
-- inlet is measured (node_samples), else y = T (and b0/(1-b1) estimates the inlet);
-- theta = b2/(1-b1) C/W, tau = -dt/ln(b1) s.
-- Grain: gpu_uuid, samples of `thermal_input_samples` on $day whose previous sample is at most
-- $max_gap_s earlier. Inlet: `thermal_input_inlet` (host, sampled_at, inlet_temp_c; may be empty),
-- the host's last reading at or before the sample.
-- Columns: host, gpu_uuid, gpu_model, n, inlet_measured (bool), interval_s (s, median gap),
--   mean_inlet_c (C), mean_power_w (W), s_* sums of products of x = (1, y_prev, p) and y.
WITH day_rows AS (
    SELECT g.host, g.gpu_uuid, g.gpu_model, g.sampled_at, CAST(g.temp_c AS DOUBLE) AS temp_c,
           CAST(g.power_w AS DOUBLE) AS power_w, i.inlet_temp_c
    FROM thermal_input_samples AS g
    ASOF LEFT JOIN thermal_input_inlet AS i ON g.host = i.host AND g.sampled_at >= i.sampled_at
    WHERE g.day = $day AND g.temp_c IS NOT NULL AND g.power_w IS NOT NULL
),
with_prev AS (
    SELECT *,
        temp_c - coalesce(inlet_temp_c, 0.0) AS y,
        lag(temp_c) OVER w - coalesce(inlet_temp_c, 0.0) AS y_prev,
        epoch(sampled_at) - epoch(lag(sampled_at) OVER w) AS gap_s
    FROM day_rows
    WINDOW w AS (PARTITION BY gpu_uuid ORDER BY sampled_at)
)
SELECT
    host, gpu_uuid, any_value(gpu_model) AS gpu_model,
    count(*) AS n,
    bool_and(inlet_temp_c IS NOT NULL) AS inlet_measured,
    median(gap_s) AS interval_s,
    avg(inlet_temp_c) AS mean_inlet_c,
    avg(power_w) AS mean_power_w,
    sum(y_prev) AS s_0_1, sum(power_w) AS s_0_2,
    sum(y_prev * y_prev) AS s_1_1, sum(y_prev * power_w) AS s_1_2, sum(power_w * power_w) AS s_2_2,
    sum(y) AS s_0_y, sum(y_prev * y) AS s_1_y, sum(power_w * y) AS s_2_y
FROM with_prev
WHERE y_prev IS NOT NULL AND gap_s <= $max_gap_s
GROUP BY host, gpu_uuid
ORDER BY host, gpu_uuid
