-- power_predictions: the fitted models' power, for the rows their validation and residuals read.
-- A temporary view models.power_store creates with power_fit_coefficients: the one definition of
-- the predicted power that its three readers (power_holdout_metrics, power_job_energy_error,
-- fct_power_residual_hourly) share, each with its own filter (DuckDB pushes it into the features).
-- Kept as a table it cost more than it saved: one more copy of the day's rows (fit 2.07-2.18 s
-- against 1.84-1.94 s on a 64-GPU day).
-- Grain: one row of power_features with every feature present.
-- Inputs: power_features, power_fit_coefficients.
-- Columns: gpu_model, feature_set, host, gpu_uuid, source, sampled_at [TIMESTAMPTZ, UTC], day [DATE],
--   interval_s [s], power_w [W], temp_c [C], is_power_limited, is_holdout,
--   model_power_w [W] the model's power, uncapped,
--   predicted_power_w [W] capped at the row's power limit (P_actual = min(P_model, P_limit)).
CREATE OR REPLACE TEMP VIEW power_predictions AS
SELECT
    gpu_model, feature_set, host, gpu_uuid, source, sampled_at, day, interval_s, power_w, temp_c,
    is_power_limited, is_holdout, model_power_w,
    least(model_power_w, coalesce(power_limit_w, 1e9)) AS predicted_power_w
FROM (
    SELECT
        f.*,
        c.static_w + c.temp_w_per_c * f.temp_delta_c
            + c.dyn_w * power_dynamic_ratio(f.activity_ratio, f.prior_busy_activity_ratio, f.since_busy_s,
                  f.clock_ratio, coalesce(c.dyn_freq_exponent, 1.0), c.activity_exponent, c.activity_hold_s)
            + c.mem_w * f.memory_ratio + c.pcie_w_per_gbps * f.pcie_gbps AS model_power_w
    FROM power_features AS f
    JOIN power_fit_coefficients AS c USING (gpu_model)
    WHERE f.is_complete
)
