-- fct_node_reconciliation_hourly: each server's BMC energy against the sum of its GPUs' energy.
-- The residual is what the GPUs do not explain: CPUs, memory, fans, disks, PSU losses.
-- kind: day
-- grain: one row per (hour_at, host) with BMC readings or GPU energy
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   host [text] server
--   node_energy_kwh [kWh] fct_node_energy_hourly.energy_kwh (NULL without BMC readings)
--   gpu_energy_kwh [kWh] sum of fct_gpu_energy_hourly.energy_kwh of the host's GPUs
--   residual_kwh [kWh] node_energy_kwh - gpu_energy_kwh (negative: the meters disagree)
--   residual_share [ratio] residual_kwh / node_energy_kwh
--   node_coverage_ratio [0..1] coverage of the BMC readings
--   gpu_coverage_ratio [0..1] lowest coverage among the host's GPUs: every GPU seen on the host
--     that day, a GPU with no row in the hour anywhere counting 0 (one GPU unread from 00:30 left
--     the hour looking fully covered, its draw in the residual); a GPU read on another host in
--     the hour (moved) is not this host's then
--   n_gpus [count] GPUs with energy in the hour
-- Compare only hours where both coverage ratios are near 1: energies cover the measured part only.
WITH node AS (
    SELECT hour_at, host, energy_kwh AS node_energy_kwh, coverage_ratio AS node_coverage_ratio
    FROM fct_node_energy_hourly
    WHERE day = $day::DATE
),
gpu_hours AS (
    SELECT hour_at, host, gpu_uuid, energy_kwh, coverage_ratio
    FROM fct_gpu_energy_hourly
    WHERE day = $day::DATE
),
host_gpus AS (
    SELECT DISTINCT host, gpu_uuid FROM gpu_hours
),
host_hours AS (
    SELECT hour_at, host FROM gpu_hours
    UNION
    SELECT hour_at, host FROM node
),
read_somewhere AS (
    SELECT DISTINCT hour_at, gpu_uuid FROM gpu_hours
),
gpus AS (
    SELECT
        h.hour_at, h.host,
        sum(g.energy_kwh ORDER BY k.gpu_uuid) AS gpu_energy_kwh,  -- a fixed order: the same sum on a re-run
        min(coalesce(g.coverage_ratio, 0)) AS gpu_coverage_ratio,
        count(g.energy_kwh) AS n_gpus
    FROM host_hours AS h
    JOIN host_gpus AS k USING (host)
    LEFT JOIN gpu_hours AS g ON g.hour_at = h.hour_at AND g.host = k.host AND g.gpu_uuid = k.gpu_uuid
    -- unread here but read on another host that hour: moved, not missing
    WHERE g.gpu_uuid IS NOT NULL
       OR NOT EXISTS (SELECT 1 FROM read_somewhere AS r WHERE r.hour_at = h.hour_at AND r.gpu_uuid = k.gpu_uuid)
    GROUP BY h.hour_at, h.host
),
joined AS (
    SELECT * FROM node FULL OUTER JOIN gpus USING (hour_at, host)
)
SELECT
    hour_at,
    $day::DATE AS day,
    host,
    node_energy_kwh,
    gpu_energy_kwh,
    node_energy_kwh - gpu_energy_kwh AS residual_kwh,
    CASE WHEN node_energy_kwh > 0 THEN (node_energy_kwh - gpu_energy_kwh) / node_energy_kwh END AS residual_share,
    node_coverage_ratio,
    gpu_coverage_ratio,
    coalesce(n_gpus, 0) AS n_gpus
FROM joined
