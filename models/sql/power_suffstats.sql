-- power_suffstats: sufficient statistics of the linear power model per GPU model and dynamic-term shape.
-- Grain: gpu_model x (alpha, activity_exponent, activity_hold_s), training rows only (not held out,
-- not power limited, every feature present).
-- Model: power_w = b0 + b1*temp_delta_c + b2*dyn + b3*memory_ratio + b4*pcie_gbps, with
--   dyn = power_dynamic_ratio(...) (models/sql/power_dynamic_ratio.sql):
--   with clock readings: activity * clock_ratio^alpha, alpha on the grid $alpha_min + $alpha_step*i;
--   without (alpha not identifiable): activity^gamma decaying with hold time constant tau after
--   work stops, gamma on $gamma_min + $gamma_step*i, tau in $hold_grid_s (s) (utilisation saturates:
--   any kernel running raises clocks and power, so power is concave in util_gpu).
-- Columns: alpha, activity_exponent (gamma), activity_hold_s (tau, s), n (rows),
--   xtx_i_j = sum(x_i*x_j) (units: products of the features'), xty_i = sum(x_i*power_w) (W x feature),
--   yty = sum(power_w^2) (W^2).
-- Parameters: $alpha_min, $alpha_step DOUBLE, $alpha_count INTEGER; $gamma_min, $gamma_step DOUBLE,
--   $gamma_count INTEGER; $hold_grid_s DOUBLE[].
-- Inputs: power_features (samples after each model's stored_until_epoch_s), power_feature_choice,
--   power_stored_hours (the window's stored daily sums before it, fct_power_fit_sums_hourly).
-- Plain sums over a GROUP BY: any engine (Spark, Trino) computes them per partition and adds.
-- With clocks the rows are summed once per distinct clock ratio (the clock is a whole MHz, so a few
-- hundred groups), and the alpha grid scales those sums by clock_ratio^alpha: the grid costs
-- nothing per row. Without clocks the decay term depends on each row's history, so the grid is
-- expanded per row (such logs are small).
-- Spark runs this file as warehouse/spark_dialect.py renders it (the macro inlined; the grid's
-- unnest(range()) becomes explode(sequence()), which, unlike a range() table, takes bound values).
WITH shape_grid AS (
    SELECT true AS has_clock, $alpha_min + $alpha_step * i AS alpha, 1.0 AS activity_exponent,
           0.0 AS activity_hold_s
    FROM (SELECT unnest(range(0, CAST($alpha_count AS BIGINT))) AS i) AS t
    UNION ALL
    SELECT false, 1.0, $gamma_min + $gamma_step * i, h.hold_s
    FROM (SELECT unnest(range(0, CAST($gamma_count AS BIGINT))) AS i) AS t
    CROSS JOIN (SELECT unnest(CAST($hold_grid_s AS DOUBLE[])) AS hold_s) AS h
),
model_clock AS (
    SELECT gpu_model, clock_varies AS has_clock
    FROM power_feature_choice
),
training AS (
    SELECT gpu_model, feature_set, power_w AS y,
           temp_delta_c AS x1, activity_ratio, prior_busy_activity_ratio, since_busy_s, clock_ratio,
           memory_ratio AS x3, pcie_gbps AS x4
    FROM power_features
    WHERE NOT is_holdout AND NOT is_stored AND NOT is_power_limited AND is_complete
),
row_clock_groups AS (
    SELECT t.gpu_model, t.feature_set, t.clock_ratio,
           count(*) AS n, sum(x1) AS s1, sum(activity_ratio) AS sa, sum(x3) AS s3, sum(x4) AS s4,
           sum(x1 * x1) AS s11, sum(x1 * activity_ratio) AS s1a, sum(x1 * x3) AS s13, sum(x1 * x4) AS s14,
           sum(activity_ratio * activity_ratio) AS saa, sum(activity_ratio * x3) AS sa3,
           sum(activity_ratio * x4) AS sa4, sum(x3 * x3) AS s33, sum(x3 * x4) AS s34, sum(x4 * x4) AS s44,
           sum(y) AS sy, sum(x1 * y) AS s1y, sum(activity_ratio * y) AS say, sum(x3 * y) AS s3y,
           sum(x4 * y) AS s4y, sum(y * y) AS syy
    FROM training AS t
    JOIN model_clock AS m USING (gpu_model)
    WHERE m.has_clock
    GROUP BY t.gpu_model, t.feature_set, t.clock_ratio
),
stored_clock_groups AS (
    SELECT s.gpu_model, c.feature_set, s.sm_clock_mhz / c.f_max_mhz AS clock_ratio,
           s.n, s.s1, s.sa, s.s3, s.s4, s.s11, s.s1a, s.s13, s.s14, s.saa, s.sa3, s.sa4, s.s33, s.s34, s.s44,
           s.sy, s.s1y, s.say, s.s3y, s.s4y, s.syy
    FROM power_stored_hours AS s
    JOIN power_feature_choice AS c USING (gpu_model)
    WHERE c.clock_varies AND s.sm_clock_mhz IS NOT NULL AND s.n > 0
),
clock_groups AS (
    SELECT gpu_model, feature_set, clock_ratio,
           sum(n) AS n, sum(s1) AS s1, sum(sa) AS sa, sum(s3) AS s3, sum(s4) AS s4, sum(s11) AS s11,
           sum(s1a) AS s1a, sum(s13) AS s13, sum(s14) AS s14, sum(saa) AS saa, sum(sa3) AS sa3, sum(sa4) AS sa4,
           sum(s33) AS s33, sum(s34) AS s34, sum(s44) AS s44, sum(sy) AS sy, sum(s1y) AS s1y, sum(say) AS say,
           sum(s3y) AS s3y, sum(s4y) AS s4y, sum(syy) AS syy
    -- by position: both list the same columns in one order (Spark SQL has no UNION BY NAME)
    FROM (SELECT * FROM row_clock_groups UNION ALL SELECT * FROM stored_clock_groups)
    GROUP BY gpu_model, feature_set, clock_ratio
),
clock_stats AS (
    SELECT
        c.gpu_model, c.feature_set, g.alpha, g.activity_exponent, g.activity_hold_s,
        sum(c.n) AS n,
        sum(c.s1) AS xtx_0_1, sum(pow(c.clock_ratio, g.alpha) * c.sa) AS xtx_0_2, sum(c.s3) AS xtx_0_3,
        sum(c.s4) AS xtx_0_4,
        sum(c.s11) AS xtx_1_1, sum(pow(c.clock_ratio, g.alpha) * c.s1a) AS xtx_1_2, sum(c.s13) AS xtx_1_3,
        sum(c.s14) AS xtx_1_4,
        sum(pow(c.clock_ratio, 2 * g.alpha) * c.saa) AS xtx_2_2, sum(pow(c.clock_ratio, g.alpha) * c.sa3) AS xtx_2_3,
        sum(pow(c.clock_ratio, g.alpha) * c.sa4) AS xtx_2_4,
        sum(c.s33) AS xtx_3_3, sum(c.s34) AS xtx_3_4,
        sum(c.s44) AS xtx_4_4,
        sum(c.sy) AS xty_0, sum(c.s1y) AS xty_1, sum(pow(c.clock_ratio, g.alpha) * c.say) AS xty_2,
        sum(c.s3y) AS xty_3, sum(c.s4y) AS xty_4,
        sum(c.syy) AS yty
    FROM clock_groups AS c
    JOIN shape_grid AS g ON g.has_clock
    GROUP BY c.gpu_model, c.feature_set, g.alpha, g.activity_exponent, g.activity_hold_s
),
expanded AS (
    SELECT t.gpu_model, t.feature_set, g.alpha, g.activity_exponent, g.activity_hold_s, t.y, t.x1,
           power_dynamic_ratio(t.activity_ratio, t.prior_busy_activity_ratio, t.since_busy_s, t.clock_ratio,
                               g.alpha, g.activity_exponent, g.activity_hold_s) AS x2,
           t.x3, t.x4
    FROM training AS t
    JOIN model_clock AS m USING (gpu_model)
    JOIN shape_grid AS g ON NOT g.has_clock
    WHERE NOT m.has_clock
),
row_stats AS (
    SELECT
        gpu_model, feature_set, alpha, activity_exponent, activity_hold_s,
        count(*) AS n,
        sum(x1) AS xtx_0_1, sum(x2) AS xtx_0_2, sum(x3) AS xtx_0_3, sum(x4) AS xtx_0_4,
        sum(x1 * x1) AS xtx_1_1, sum(x1 * x2) AS xtx_1_2, sum(x1 * x3) AS xtx_1_3, sum(x1 * x4) AS xtx_1_4,
        sum(x2 * x2) AS xtx_2_2, sum(x2 * x3) AS xtx_2_3, sum(x2 * x4) AS xtx_2_4,
        sum(x3 * x3) AS xtx_3_3, sum(x3 * x4) AS xtx_3_4,
        sum(x4 * x4) AS xtx_4_4,
        sum(y) AS xty_0, sum(x1 * y) AS xty_1, sum(x2 * y) AS xty_2, sum(x3 * y) AS xty_3, sum(x4 * y) AS xty_4,
        sum(y * y) AS yty
    FROM expanded
    GROUP BY gpu_model, feature_set, alpha, activity_exponent, activity_hold_s
)
SELECT * FROM clock_stats
UNION ALL
SELECT * FROM row_stats
ORDER BY gpu_model, alpha, activity_exponent, activity_hold_s
