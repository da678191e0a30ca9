-- power_suffstats (Spark SQL): models/sql/power_suffstats.sql on Apache Spark: sufficient
-- statistics (n, X'X, X'y, y'y) of the linear power model per GPU model and dynamic-term shape.
-- grain: gpu_model x (alpha, activity_exponent, activity_hold_s), training rows only
-- inputs: temp views power_features (spark_sql/power_features.sql) and power_shape_grid
--   (has_clock, alpha, activity_exponent, activity_hold_s: the DuckDB file's shape_grid, built by
--   warehouse.spark_engine from the same settings, since a range() cannot take bound parameters)
-- columns: gpu_model, feature_set, alpha, activity_exponent, activity_hold_s [s], n [rows],
--   xtx_i_j = sum(x_i*x_j), xty_i = sum(x_i*power_w) [W x feature], yty = sum(power_w^2) [W^2]
--   with x0 = 1, x1 = temp_delta_c, x2 = dynamic ratio, x3 = memory_ratio, x4 = pcie_gbps.
-- Plain sums over GROUP BY: Spark computes them per partition and adds (partial aggregation).
-- The dynamic ratio is models/sql/power_dynamic_ratio.sql inlined (Spark has no SQL macros).
WITH model_clock AS (
    SELECT gpu_model, coalesce(min(clock_ratio) < max(clock_ratio), false) AS has_clock
    FROM power_features
    GROUP BY gpu_model
),
training AS (
    SELECT gpu_model, feature_set, power_w AS y,
           temp_delta_c AS x1, activity_ratio, prior_busy_activity_ratio, since_busy_s, clock_ratio,
           memory_ratio AS x3, pcie_gbps AS x4
    FROM power_features
    WHERE NOT is_holdout AND NOT is_power_limited AND is_complete
),
clock_groups AS (
    SELECT t.gpu_model, t.feature_set, t.clock_ratio,
           count(*) AS n, sum(x1) AS s1, sum(activity_ratio) AS sa, sum(x3) AS s3, sum(x4) AS s4,
           sum(x1 * x1) AS s11, sum(x1 * activity_ratio) AS s1a, sum(x1 * x3) AS s13, sum(x1 * x4) AS s14,
           sum(activity_ratio * activity_ratio) AS saa, sum(activity_ratio * x3) AS sa3,
           sum(activity_ratio * x4) AS sa4, sum(x3 * x3) AS s33, sum(x3 * x4) AS s34, sum(x4 * x4) AS s44,
           sum(y) AS sy, sum(x1 * y) AS s1y, sum(activity_ratio * y) AS say, sum(x3 * y) AS s3y,
           sum(x4 * y) AS s4y, sum(y * y) AS syy
    FROM training AS t
    JOIN model_clock AS m ON m.gpu_model = t.gpu_model
    WHERE m.has_clock
    GROUP BY t.gpu_model, t.feature_set, t.clock_ratio
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
    JOIN power_shape_grid AS g ON g.has_clock
    GROUP BY c.gpu_model, c.feature_set, g.alpha, g.activity_exponent, g.activity_hold_s
),
expanded AS (
    SELECT t.gpu_model, t.feature_set, g.alpha, g.activity_exponent, g.activity_hold_s, t.y, t.x1,
           CASE
               WHEN g.activity_hold_s > 0 AND t.since_busy_s IS NOT NULL
                   THEN greatest(pow(t.activity_ratio, g.activity_exponent),
                                 pow(t.prior_busy_activity_ratio, g.activity_exponent)
                                     * exp(-least(t.since_busy_s / g.activity_hold_s, 700.0)))
               ELSE pow(t.activity_ratio, g.activity_exponent)
           END * pow(t.clock_ratio, g.alpha) AS x2,
           t.x3, t.x4
    FROM training AS t
    JOIN model_clock AS m ON m.gpu_model = t.gpu_model
    JOIN power_shape_grid AS g ON NOT g.has_clock
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
