-- power_stored_hours: the stored daily statistics (fct_power_fit_sums_hourly) that stand in for
-- a fit's training samples: hours of the window before each model's stored_until_epoch_s.
-- Grain: gpu_model x hour_at x sm_clock_mhz, as fct_power_fit_sums_hourly (same columns).
-- Inputs: fct_power_fit_sums_hourly, power_feature_choice (temp table built by models.power).
-- Parameters: $day DATE, $history_days INTEGER, $source VARCHAR.
SELECT s.*
FROM fct_power_fit_sums_hourly AS s
JOIN power_feature_choice AS c USING (gpu_model)
WHERE s.source_relation = $source
  AND s.day <= $day
  AND s.day > $day - CAST($history_days AS INTEGER)
  AND epoch(s.hour_at) < c.stored_until_epoch_s
