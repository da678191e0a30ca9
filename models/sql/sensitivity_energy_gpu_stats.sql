-- sensitivity_energy_gpu_stats: per-GPU sufficient statistics of the log-log regression of hourly
-- GPU energy on hourly activity and memory activity, for one day.
-- Grain: gpu_uuid (with its gpu_model), busy GPU-hours of $day only.
-- Inputs: fct_gpu_energy_hourly (energy_kwh, coverage_ratio), gpu_activity_samples (activity per
--   sample of the GPU's one activity stream).
-- Model (per GPU-hour h): ln(energy_kwh) = a_model + e_util*ln(activity) + e_dram*ln(memory) + error:
--   e_util, e_dram are the elasticities of energy to utilisation and to memory bandwidth.
--   activity: the stream's activity_ratio (SM activity, else utilisation), hourly mean (0..1);
--   memory: its memory_ratio (DRAM activity, else memory utilisation), hourly mean (0..1).
-- Hours kept: coverage_ratio >= $min_coverage_ratio, energy > 0, activity and memory >= $min_activity_ratio
--   (an idle hour's log activity says nothing about a working one and ln 0 is undefined).
-- Columns: gpu_uuid, gpu_model, n (hours), s_1 = sum(x1), s_2 = sum(x2), s_y = sum(y), s_11, s_12,
--   s_22, s_1y, s_2y, s_yy (sums of products; x1 = ln activity, x2 = ln memory, y = ln kWh).
-- Plain sums per GPU: the model's fixed effects and a GPU-cluster bootstrap are done in numpy.
WITH hourly_activity AS (
    SELECT
        gpu_uuid,
        date_trunc('hour', sampled_at) AS hour_at,
        avg(activity_ratio) AS activity_ratio,
        avg(memory_ratio) AS memory_ratio
    FROM gpu_activity_samples
    WHERE day = $day
    GROUP BY gpu_uuid, date_trunc('hour', sampled_at)
),
gpu_hours AS (
    SELECT
        e.gpu_uuid,
        e.gpu_model,
        ln(a.activity_ratio) AS x1,
        ln(a.memory_ratio) AS x2,
        ln(e.energy_kwh) AS y
    FROM fct_gpu_energy_hourly AS e
    JOIN hourly_activity AS a USING (gpu_uuid, hour_at)
    WHERE e.day = $day
      AND e.energy_kwh > 0
      AND e.coverage_ratio >= $min_coverage_ratio
      AND a.activity_ratio >= $min_activity_ratio
      AND a.memory_ratio >= $min_activity_ratio
)
SELECT
    gpu_uuid, any_value(gpu_model) AS gpu_model,
    count(*) AS n,
    sum(x1) AS s_1, sum(x2) AS s_2, sum(y) AS s_y,
    sum(x1 * x1) AS s_11, sum(x1 * x2) AS s_12, sum(x2 * x2) AS s_22,
    sum(x1 * y) AS s_1y, sum(x2 * y) AS s_2y, sum(y * y) AS s_yy
FROM gpu_hours
GROUP BY gpu_uuid
ORDER BY gpu_uuid
