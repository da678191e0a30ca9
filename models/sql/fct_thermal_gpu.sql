-- fct_thermal_gpu: thermal resistance and time constant per GPU per day (delete-then-insert).
-- Grain: day x gpu_uuid.
-- Columns: day (DATE), host, gpu_uuid, gpu_model, n_samples, theta_c_per_w (C/W, chip temperature
--   rise per W above inlet), tau_s (s, first-order time constant), inlet_c (C, mean measured inlet,
--   or the fit's constant-inlet estimate), inlet_source ('node_samples' | 'estimated'),
--   rank_in_model (1 = coolest-running per W within its GPU model), model_median_theta_c_per_w (C/W),
--   theta_vs_model_pct (%, vs the model's median), is_outlier (more than the threshold from it).
CREATE TABLE IF NOT EXISTS fct_thermal_gpu (
    day DATE NOT NULL,
    host VARCHAR NOT NULL,
    gpu_uuid VARCHAR NOT NULL,
    gpu_model VARCHAR,
    n_samples BIGINT,
    theta_c_per_w DOUBLE,
    tau_s DOUBLE,
    inlet_c DOUBLE,
    inlet_source VARCHAR,
    rank_in_model INTEGER,
    model_median_theta_c_per_w DOUBLE,
    theta_vs_model_pct DOUBLE,
    is_outlier BOOLEAN
)
