-- recommend_gpu_peak_power: each GPU's 95th percentile of power on one day.
-- Grain: host, gpu_uuid; rows of `reco_input_samples` (temp view over stg_gpu_samples) with day = $day.
-- Columns: host, gpu_uuid, p95_power_w (W, interpolated 95th percentile of power_w).
-- Apart from recommend_gpu_profile because only the reason of a clock-lock recommendation uses it
-- and its exact quantile costs as much as a fifth of the profile: models.recommend runs it the
-- first time a GPU needs it.
SELECT host, gpu_uuid, quantile_cont(power_w, 0.95) AS p95_power_w
FROM reco_input_samples
WHERE day = $day AND power_w IS NOT NULL
GROUP BY host, gpu_uuid
