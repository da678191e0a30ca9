-- fct_job_energy_prediction: a job's energy on another GPU model, predicted from its run on the one it
-- ran on, beside the measured energy of the same profile's run on that other model.
-- Grain: day x job_id x to_gpu_model (delete-then-insert for the day).
-- Columns and units:
--   day (DATE), job_id (the source run), from_gpu_model, to_gpu_model, target_job_id (the run on
--   to_gpu_model it is checked against), predicted_energy_kwh (kWh, to_gpu_model's fitted model on
--   the source run's activity profile), measured_energy_kwh (kWh, the target run, power x interval),
--   source_energy_kwh (kWh, the source run as measured), error_pct (%, 100 x (predicted - measured)
--   / measured), time_scale (target / source run time assumed; 1 = the same profile for the same time)
CREATE TABLE IF NOT EXISTS fct_job_energy_prediction (
    day DATE NOT NULL,
    job_id VARCHAR NOT NULL,
    from_gpu_model VARCHAR NOT NULL,
    to_gpu_model VARCHAR NOT NULL,
    target_job_id VARCHAR,
    predicted_energy_kwh DOUBLE,
    measured_energy_kwh DOUBLE,
    source_energy_kwh DOUBLE,
    error_pct DOUBLE,
    time_scale DOUBLE
)
