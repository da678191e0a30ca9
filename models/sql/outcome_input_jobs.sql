-- outcome_input_jobs: the jobs' days as the savings measurement reads them (models.outcome): each
-- job-GPU-day of fct_job_efficiency with its work and hours cut to the part its energy was measured
-- over (measured_hours / busy_hours). Energy per unit of work then sets measured energy against the
-- work of the same time: a collector down half of an "after" day read as a halving of the energy
-- per FLOP, a saving the setting never made. A row from before measured_hours was kept counts whole.
-- A temporary view; no parameters. Columns: fct_job_efficiency's.
SELECT * EXCLUDE (measured_ratio) REPLACE (
    requests_total * measured_ratio AS requests_total, tokens_total * measured_ratio AS tokens_total,
    samples_total * measured_ratio AS samples_total, flops_total * measured_ratio AS flops_total,
    busy_hours * measured_ratio AS busy_hours)
FROM (SELECT *, coalesce(measured_hours / nullif(busy_hours, 0), 1.0) AS measured_ratio FROM fct_job_efficiency)
