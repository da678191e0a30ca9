-- headline_gpu_energy: the day's GPU board energy and how completely the GPUs were observed.
-- Parameters: $day (DATE). One row; NULL amounts when the day has no GPU-hours.
-- columns: gpu_energy_kwh [kWh] sum of fct_gpu_energy_hourly; coverage_ratio [0..1] mean over GPUs
--   of fct_gpu_coverage_daily.coverage_ratio; gpus [count] GPUs with any reading that day
SELECT
    (SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE day = $day) AS gpu_energy_kwh,
    (SELECT avg(coverage_ratio) FROM fct_gpu_coverage_daily WHERE day = $day) AS coverage_ratio,
    (SELECT count(*) FROM fct_gpu_coverage_daily WHERE day = $day) AS gpus
