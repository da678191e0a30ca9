-- power_job_energy_error: error of the model's energy over each held-out job, per GPU model.
-- Grain: gpu_model. A job is a (job_id, gpu_uuid) row of `power_input_jobs` (a temporary view over
-- the jobs relation); its energy is the sum of power x interval over its held-out samples. The
-- prediction is capped at the row's power limit (P_actual = min(P_model, P_limit)), so capped rows count.
-- Inputs: power_holdout_predictions (models/sql/power_holdout_predictions.sql: the held-out rows of
--   power_predictions, with the models of power_fit_coefficients), power_input_jobs.
-- Columns: gpu_model, n_jobs, job_energy_error_pct (%, mean over jobs of |predicted - measured| / measured),
--          measured_energy_kwh, predicted_energy_kwh (kWh, all those jobs together).
WITH predicted AS (
    SELECT gpu_model, gpu_uuid, sampled_at, interval_s, power_w, predicted_power_w
    FROM power_holdout_predictions
),
per_job AS (
    SELECT
        p.gpu_model, j.job_id, j.gpu_uuid,
        sum(p.power_w * p.interval_s) / 3.6e6 AS measured_energy_kwh,
        sum(p.predicted_power_w * p.interval_s) / 3.6e6 AS predicted_energy_kwh
    FROM predicted AS p
    JOIN power_input_jobs AS j
      ON p.gpu_uuid = j.gpu_uuid AND p.sampled_at >= j.started_at AND p.sampled_at < j.ended_at
    GROUP BY p.gpu_model, j.job_id, j.gpu_uuid
)
SELECT
    gpu_model,
    count(*) AS n_jobs,
    100.0 * avg(abs(predicted_energy_kwh - measured_energy_kwh) / measured_energy_kwh) AS job_energy_error_pct,
    sum(measured_energy_kwh) AS measured_energy_kwh,
    sum(predicted_energy_kwh) AS predicted_energy_kwh
FROM per_job
WHERE measured_energy_kwh > 0
GROUP BY gpu_model
