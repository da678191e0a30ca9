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
--     1, 10 and 30 s gave 2, 19 and 107 s (theta 0.056 C/W each time), so compare GPUs read alike;
--     NULL where transient_sd_c is under 1 C (power that only drifted: tau read 1.4-4.4x the truth)
--   tau_rel_se [ratio] standard error of the fitted tau over tau, from the regression's residual
--     variance (delta method): sampling noise only, not the bias that NULLs tau (a tau 3x the truth
--     had 0.056); also where tau_s is NULL
--   transient_sd_c [C] standard deviation of the temperature a step starts from that the step's power
--     does not explain, what tau is timed from: under a whole-degree reading's 1 C, tau_s is NULL
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
    tau_rel_se DOUBLE,
    transient_sd_c DOUBLE,
    inlet_c DOUBLE,
    inlet_source VARCHAR,
    rank_in_model INTEGER,
    model_median_theta_c_per_w DOUBLE,
    theta_vs_model_pct DOUBLE,
    is_outlier BOOLEAN
)
