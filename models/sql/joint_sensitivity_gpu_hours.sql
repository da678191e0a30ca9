-- joint_sensitivity_gpu_hours: the inputs of the joint sensitivity, one row per covered GPU-hour of $day.
-- Grain: gpu_uuid x hour_at. Inputs: fct_gpu_energy_hourly, gpu_activity_samples (activity),
--   fct_link_bandwidth_hourly (occupancy of the GPU's NVLink and PCIe, and its host's network ports),
--   raw_jobs (the workload class that held the GPU most of the hour), dim_gpu (site).
-- Columns: gpu_uuid, gpu_model, site, hour_at, workload_class (NULL: no job most of the hour),
--   energy_kwh [kWh], activity_ratio [0..1] hourly mean, network_occupancy_ratio [0..1]: the fullest
--   of the GPU's own links that hour (NVLink or PCIe: the one that binds its traffic); only a GPU
--   with neither reading takes its host's network ports' mean (they are shared by all its GPUs, so
--   they would credit one GPU with its neighbours' traffic).
-- Hours kept: coverage_ratio >= $min_coverage_ratio and energy > 0.
WITH activity AS (
    SELECT gpu_uuid, date_trunc('hour', sampled_at) AS hour_at, avg(activity_ratio) AS activity_ratio
    FROM gpu_activity_samples
    WHERE day = $day
    GROUP BY ALL
),
gpu_links AS (
    SELECT gpu_uuid, hour_at, max(occupancy_ratio) AS occupancy_ratio
    FROM fct_link_bandwidth_hourly
    WHERE day = $day AND gpu_uuid IS NOT NULL
    GROUP BY ALL
),
host_ports AS (
    SELECT host, hour_at, avg(occupancy_ratio) AS occupancy_ratio
    FROM fct_link_bandwidth_hourly
    WHERE day = $day AND link_kind = 'infiniband'
    GROUP BY ALL
),
holdings AS (
    -- a (job_id, gpu_uuid, started_at) repeated in the jobs counts once, its latest end (eff_holdings.sql)
    SELECT DISTINCT ON (job_id, gpu_uuid, started_at) gpu_uuid, workload_class, started_at, ended_at
    FROM raw_jobs
    WHERE date BETWEEN CAST($day AS DATE) - 7 AND CAST($day AS DATE)
    ORDER BY job_id, gpu_uuid, started_at, ended_at DESC
),
job_hours AS (
    SELECT j.gpu_uuid, h.hour_at, j.workload_class,
           sum(epoch(least(j.ended_at, h.hour_at + INTERVAL 1 HOUR)) - epoch(greatest(j.started_at, h.hour_at))) AS held_s
    FROM holdings AS j
    JOIN (SELECT DISTINCT hour_at FROM fct_gpu_energy_hourly WHERE day = $day) AS h
      ON j.started_at < h.hour_at + INTERVAL 1 HOUR AND j.ended_at > h.hour_at
    WHERE j.workload_class IS NOT NULL
    GROUP BY ALL
),
job_class AS (
    SELECT gpu_uuid, hour_at, arg_max(workload_class, held_s) AS workload_class, max(held_s) AS held_s
    FROM job_hours
    GROUP BY ALL
)
SELECT
    e.gpu_uuid, e.gpu_model, g.site, e.hour_at,
    CASE WHEN c.held_s >= 1800 THEN c.workload_class END AS workload_class,
    e.energy_kwh, a.activity_ratio,
    coalesce(l.occupancy_ratio, p.occupancy_ratio) AS network_occupancy_ratio
FROM fct_gpu_energy_hourly AS e
JOIN activity AS a USING (gpu_uuid, hour_at)
LEFT JOIN gpu_links AS l USING (gpu_uuid, hour_at)
LEFT JOIN host_ports AS p ON p.host = e.host AND p.hour_at = e.hour_at
LEFT JOIN job_class AS c ON c.gpu_uuid = e.gpu_uuid AND c.hour_at = e.hour_at
LEFT JOIN dim_gpu AS g ON g.gpu_uuid = e.gpu_uuid
WHERE e.day = $day AND e.energy_kwh > 0 AND e.coverage_ratio >= $min_coverage_ratio
  AND a.activity_ratio IS NOT NULL
  AND (l.occupancy_ratio IS NOT NULL OR p.occupancy_ratio IS NOT NULL)
ORDER BY e.gpu_uuid, e.hour_at
