-- fct_job_energy_prediction: a job's energy on another GPU model, predicted from its run on the one it
-- ran on, beside the measured energy of the same profile's run on that other model.
-- kind: day
-- grain: one row per (day, job_id, to_gpu_model)
-- Written by models.job_energy.job_energy_day (delete-then-insert for the day).
-- columns:
--   day [DATE] UTC day
--   job_id [text] the source run
--   from_gpu_model [text] GPU model the source run ran on
--   to_gpu_model [text] GPU model predicted for
--   target_job_id [text] the run on to_gpu_model the prediction is checked against
--   predicted_energy_kwh [kWh] before the job ran on to_gpu_model: its fitted model on the source run's
--     activity profile x the time the catalogue's throughput ratio predicts, refined by other jobs
--     that ran on both models (models.job_energy)
--   measured_energy_kwh [kWh] the target run, power x interval, scaled to the source run's work
--     (samples_total, else flops_total) where both report it
--   source_energy_kwh [kWh] the source run as measured
--   error_pct [%] 100 x (predicted - measured) / measured
--   time_scale [ratio] predicted target / source run time (the catalogue's throughput ratio)
--   predicted_time_s [s] predicted run time on to_gpu_model
--   unrefined_predicted_energy_kwh [kWh] the prediction before the refinement by other jobs' pairs
--   refined_with_jobs [count] earlier and other pairs of the same two models the refinement used
--   method [text] how the prediction was made
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
    time_scale DOUBLE,
    predicted_time_s DOUBLE,
    unrefined_predicted_energy_kwh DOUBLE,
    refined_with_jobs BIGINT,
    method VARCHAR
)
