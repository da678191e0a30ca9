-- recommend_host_overhead: what each server draws beyond its GPUs, per GPU, on one day: the part
-- of a job's energy-to-solution that a slower (capped) run also pays for longer.
-- Grain: host. Parameters: $day DATE, $min_coverage DOUBLE (0..1: both meters must have covered
--   the hour this much). Only hours where the BMC and every GPU covered the hour count.
-- Columns: host, host_overhead_w_per_gpu (W: mean over those hours of (BMC energy - GPU energy)
--   per GPU, never below 0), n_hours (count).
SELECT
    host,
    greatest(avg(residual_kwh * 1000.0 / n_gpus), 0.0) AS host_overhead_w_per_gpu,
    count(*) AS n_hours
FROM fct_node_reconciliation_hourly
WHERE day = $day
  AND n_gpus > 0 AND residual_kwh IS NOT NULL
  AND node_coverage_ratio >= $min_coverage AND gpu_coverage_ratio >= $min_coverage
GROUP BY host
