-- fct_thermal_gpu: thermal resistance and time constant of each GPU, per day.
-- kind: day
-- grain: one row per (day, gpu_uuid) whose power spread enough to measure theta (an idle GPU gets none)
-- Written by models.thermal.fit_thermal_day (delete-then-insert for the day).
-- columns:
--   day [DATE] UTC day fitted
--   host [text] server the GPU sits in
--   gpu_uuid [text] GPU
--   gpu_model [text] NVML name
--   n_samples [count] readings used
--   theta_c_per_w [C/W] chip temperature rise per W above inlet
--   tau_s [s] first-order time constant as seen at the GPU's reading interval: a real card read every
--     1, 10 and 30 s gave 2, 19 and 107 s (theta 0.056 C/W each time), so compare GPUs read alike
--   inlet_c [C] mean measured inlet, or the fit's constant-inlet estimate
--   inlet_source [text] 'node_samples' | 'estimated'
--   rank_in_model [rank] 1 = coolest-running per W within its GPU model
--   model_median_theta_c_per_w [C/W] median theta of the GPU model
--   theta_vs_model_pct [%] theta vs the model's median
--   is_outlier [bool] more than the threshold from the model's median
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
