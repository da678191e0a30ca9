-- power_holdout_predictions: the held-out rows of power_predictions, the columns their two readers
-- use. A temporary table models.power fills once per fit: power_holdout_metrics and
-- power_job_energy_error each computed every row's features again from the readings files (the
-- view re-derives them per reader), 0.53 and 0.60 s of a 64-GPU day's fit.
-- Grain: one row of power_predictions with is_holdout.
-- Inputs: power_predictions (models/sql/power_predictions.sql).
-- Columns: gpu_model, gpu_uuid, sampled_at [TIMESTAMPTZ, UTC], interval_s [s], power_w [W],
--   is_power_limited, model_power_w [W] uncapped, predicted_power_w [W] capped at the power limit.
CREATE OR REPLACE TEMP TABLE power_holdout_predictions AS
SELECT gpu_model, gpu_uuid, sampled_at, interval_s, power_w, is_power_limited, model_power_w, predicted_power_w
FROM power_predictions
WHERE is_holdout
