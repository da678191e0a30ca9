-- power_suffstats: sufficient statistics of the linear power model per GPU model and exponent.
-- Grain: gpu_model x alpha (the exponent of the clock ratio in the dynamic term), training rows
-- only (not held out, not power limited, every feature present).
-- Model: power_w = b0 + b1*temp_delta_c + b2*activity_ratio*clock_ratio^alpha + b3*memory_ratio
--                  + b4*pcie_gbps; x0 = 1, x1..x4 the features above.
-- Columns: n (rows), xtx_i_j = sum(x_i*x_j) (units: products of the features'),
--          xty_i = sum(x_i*power_w) (W x feature), yty = sum(power_w^2) (W^2).
-- Parameters: $alpha_min DOUBLE, $alpha_step DOUBLE, $alpha_count INTEGER (the grid).
-- Plain sums over a GROUP BY: any engine (Spark, Trino) computes them per partition and adds.
WITH alpha_grid AS (
    SELECT $alpha_min + $alpha_step * i AS alpha
    FROM range(0, CAST($alpha_count AS BIGINT)) AS t(i)
),
training AS (
    SELECT gpu_model, feature_set, power_w AS y,
           temp_delta_c AS x1, activity_ratio, clock_ratio, memory_ratio AS x3, pcie_gbps AS x4
    FROM power_features
    WHERE NOT is_holdout AND NOT is_power_limited AND is_complete
),
expanded AS (
    SELECT t.gpu_model, t.feature_set, g.alpha, t.y, t.x1,
           t.activity_ratio * pow(t.clock_ratio, g.alpha) AS x2, t.x3, t.x4
    FROM training AS t
    CROSS JOIN alpha_grid AS g
)
SELECT
    gpu_model, feature_set, alpha,
    count(*) AS n,
    sum(x1) AS xtx_0_1, sum(x2) AS xtx_0_2, sum(x3) AS xtx_0_3, sum(x4) AS xtx_0_4,
    sum(x1 * x1) AS xtx_1_1, sum(x1 * x2) AS xtx_1_2, sum(x1 * x3) AS xtx_1_3, sum(x1 * x4) AS xtx_1_4,
    sum(x2 * x2) AS xtx_2_2, sum(x2 * x3) AS xtx_2_3, sum(x2 * x4) AS xtx_2_4,
    sum(x3 * x3) AS xtx_3_3, sum(x3 * x4) AS xtx_3_4,
    sum(x4 * x4) AS xtx_4_4,
    sum(y) AS xty_0, sum(x1 * y) AS xty_1, sum(x2 * y) AS xty_2, sum(x3 * y) AS xty_3, sum(x4 * y) AS xty_4,
    sum(y * y) AS yty
FROM expanded
GROUP BY gpu_model, feature_set, alpha
ORDER BY gpu_model, alpha
