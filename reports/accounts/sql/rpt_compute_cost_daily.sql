-- rpt_compute_cost_daily: what a TFLOPS-hour of FP16-equivalent work cost on each GPU model, per day.
-- kind: day
-- grain: one row per (day, gpu_model); gpu_model 'fleet' for the whole fleet
-- Written by reports.accounts.compute_cost.compute_cost_day after the cost accounts. Inputs:
-- rpt_tco_daily (each job's energy and total cost), fct_job_efficiency (the job's GPUs and their energy:
-- a job on two GPU models is split by energy), fct_flops_per_watt_daily (FP16-equivalent FLOPs per model).
-- A TFLOPS-hour is 10^12 FLOP/s for an hour: 3.6e15 FLOP.
-- columns:
--   day [DATE] UTC day
--   gpu_model [text] NVML name, or 'fleet'
--   fp16_equivalent_tflops_hours [TFLOPS-hours] FP16-equivalent work of the jobs that report FLOPs
--   energy_cost_usd [USD] their energy cost at the meter
--   total_cost_usd [USD] their total cost (energy, demand, uplifts, capital, operations)
--   energy_cost_per_tflops_hour_usd [USD/TFLOPS-hour] energy cost per FP16-equivalent TFLOPS-hour
--   total_cost_per_tflops_hour_usd [USD/TFLOPS-hour] total cost per FP16-equivalent TFLOPS-hour
WITH job_models AS (
    SELECT job_id, gpu_model, sum(energy_kwh) AS energy_kwh
    FROM fct_job_efficiency
    WHERE day = $day AND flops_total > 0 AND energy_kwh > 0 AND gpu_model IS NOT NULL
    GROUP BY ALL
),
shares AS (
    SELECT job_id, gpu_model, energy_kwh / sum(energy_kwh) OVER (PARTITION BY job_id) AS share
    FROM job_models
),
costs AS (
    SELECT s.gpu_model, sum(s.share * t.energy_cost_usd) AS energy_cost_usd, sum(s.share * t.total_cost_usd) AS total_cost_usd
    FROM shares AS s
    JOIN (SELECT job_id, sum(energy_cost_usd) AS energy_cost_usd, sum(total_cost_usd) AS total_cost_usd
          FROM rpt_tco_daily WHERE day = $day GROUP BY job_id) AS t USING (job_id)
    GROUP BY ALL
),
with_fleet AS (
    SELECT * FROM costs
    UNION ALL
    SELECT 'fleet', sum(energy_cost_usd), sum(total_cost_usd) FROM costs HAVING count(*) > 0
)
SELECT
    CAST($day AS DATE) AS day, c.gpu_model,
    f.fp16_equivalent_flops_total / 3.6e15 AS fp16_equivalent_tflops_hours,
    c.energy_cost_usd, c.total_cost_usd,
    c.energy_cost_usd / nullif(f.fp16_equivalent_flops_total / 3.6e15, 0) AS energy_cost_per_tflops_hour_usd,
    c.total_cost_usd / nullif(f.fp16_equivalent_flops_total / 3.6e15, 0) AS total_cost_per_tflops_hour_usd
FROM with_fleet AS c
JOIN fct_flops_per_watt_daily AS f ON f.day = $day AND f.gpu_model = c.gpu_model
ORDER BY c.gpu_model = 'fleet', c.gpu_model
