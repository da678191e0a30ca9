-- power_holdout_metrics: how well each fitted model predicts time it did not see.
-- Grain: gpu_model. Rows: held-out, not power limited, every feature present, power_w > 0.
-- Inputs: power_holdout_predictions (models/sql/power_holdout_predictions.sql: the held-out rows of
--   power_predictions, with the models of power_fit_coefficients).
-- Columns: gpu_model, n_holdout (rows), holdout_hours (h, time the held-out rows stand for: sum of
--          their interval_s), mape_pct (%, mean |predicted - measured| / measured),
--          r2 (1 - SSE/SST, unitless), rmse_w (W).
WITH predicted AS (
    -- uncapped: the gate judges the model, and power-limited rows are left out instead
    SELECT gpu_model, power_w, interval_s, model_power_w AS predicted_power_w
    FROM power_holdout_predictions
    WHERE NOT is_power_limited AND power_w > 0
),
sums AS (
    SELECT
        gpu_model,
        count(*) AS n,
        sum(interval_s) / 3600.0 AS holdout_hours,
        sum(abs(predicted_power_w - power_w) / power_w) AS sum_abs_rel,
        sum((predicted_power_w - power_w) * (predicted_power_w - power_w)) AS sse,
        sum(power_w) AS sy,
        sum(power_w * power_w) AS syy
    FROM predicted
    GROUP BY gpu_model
)
SELECT
    gpu_model,
    n AS n_holdout,
    holdout_hours,
    100.0 * sum_abs_rel / n AS mape_pct,
    CASE WHEN syy - sy * sy / n > 0 THEN 1.0 - sse / (syy - sy * sy / n) END AS r2,
    sqrt(sse / n) AS rmse_w
FROM sums
