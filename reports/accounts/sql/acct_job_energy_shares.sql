-- acct_job_energy_shares: the jobs' measured shares of each GPU-hour's energy on one day, as the
-- accounts split the energy-driven amounts by (reports/accounts/attribution.py).
-- Grain: one row per (hour_at, gpu_uuid, job_id). Parameters: $day (DATE).
-- From the models' fct_job_energy_hourly (models.efficiency.build_efficiency).
SELECT hour_at, gpu_uuid, job_id, energy_share_ratio
FROM fct_job_energy_hourly
WHERE day = $day::DATE
