-- power_interval_profiles: the typical busy operating point of each GPU model per workload bottleneck, one day.
-- Grain: gpu_model x bottleneck ('compute-bound' | 'memory-bound' | 'communication-bound': the busiest
--   of activity, memory activity and PCIe traffic / the model's PCIe link in each busy sample, in the
--   measures the model's power fit reads; NULL: the busy samples that lack that fit's activity).
-- Input: gpu_activity_samples (one activity stream per GPU) rows of $day with activity above 5% (busy,
--   by the stream's activity, as the recommender counts busy hours);
--   link_capacity_by_model (models/bandwidth.py: pcie_capacity_bytes_per_s, one direction, of the
--   models the catalogue knows), $pcie_link_gbps (GB/s, tx + rx) for the others.
-- Parameters: $day DATE, $pcie_link_gbps DOUBLE; $sm_active_models, $util_gpu_models VARCHAR[]: the
--   GPU models whose power fit reads DCGM's SM and DRAM activity (feature set 'dcgm') and NVML's
--   utilisation and memory utilisation / 100 ('nvml'); a model in neither is read in its streams' measure
--   (fit_activity_kind.sql and activity_of_kind.sql: macros models.activity creates).
-- Why the fit's measure and not the stream's: the curves are the fit's predictions, and a GPU read
--   by DCGM carries both. An A100 fitted on NVML utilisation whose DCGM samples were half SM 0.8 /
--   DRAM 0.3, half SM 0.3 / DRAM 0.7 (NVML: 100% / 50% throughout) got a compute-bound row at 255 W
--   (12.0%) and a memory-bound one at 400 W (no gain), where the fit's own readings make all of it
--   compute-bound at 305 W (13.5%), the interval of its 'mix' row.
-- Columns: gpu_model, bottleneck, n_samples, busy_share (0..1 of the model's busy samples, those of
--   the NULL bottleneck included), activity_ratio, memory_ratio (0..1 means in the fit's measure;
--   memory over the samples that read it, NULL where none did),
--   pcie_gbps (GB/s mean, tx + rx, over the samples that read both; NULL where none did), temp_c
--   (C mean); heavy_activity_ratio, heavy_memory_ratio, heavy_pcie_gbps, heavy_temp_c: the same means over the heavier half of the
--   samples (activity at or above the group's median), where models.recommend applies the slowdown bound.
WITH busy_samples AS (
    SELECT *, fit_activity_kind(gpu_model, activity_kind, $sm_active_models, $util_gpu_models) AS fit_kind
    FROM gpu_activity_samples
    WHERE day = $day AND power_w IS NOT NULL AND activity_ratio > 0.05
),
busy AS (
    SELECT
        s.gpu_model,
        activity_of_kind(s.fit_kind, s.sm_active_ratio, s.util_gpu_pct) AS activity_ratio,
        -- NULL where not read (PCIe: either direction missing; tx without rx is no reading, not
        -- rx = 0): the means skip it, and the bottleneck is the busiest of what was read
        activity_of_kind(s.fit_kind, s.dram_active_ratio, s.util_mem_pct) AS memory_ratio,
        (s.pcie_tx_bytes_per_s + s.pcie_rx_bytes_per_s) / 1e9 AS pcie_gbps,
        coalesce(2 * l.pcie_capacity_bytes_per_s / 1e9, $pcie_link_gbps) AS pcie_link_gbps,
        s.temp_c
    FROM busy_samples AS s
    LEFT JOIN link_capacity_by_model AS l ON l.gpu_model = s.gpu_model
),
classified AS (
    SELECT
        *,
        -- A sample without the fit's activity (an NVML-only GPU of a model fitted on DCGM) has no
        -- operating point the fit can score: counted apart, not read as idle or as memory-bound.
        CASE WHEN activity_ratio IS NULL THEN NULL
             WHEN activity_ratio >= coalesce(memory_ratio, 0.0) AND activity_ratio >= coalesce(link_ratio, 0.0)
                 THEN 'compute-bound'
             WHEN memory_ratio >= coalesce(link_ratio, 0.0) THEN 'memory-bound'
             ELSE 'communication-bound' END AS bottleneck
    -- least() skips a NULL: an unread PCIe would read as a full link
    FROM (SELECT *, CASE WHEN pcie_gbps IS NOT NULL THEN least(pcie_gbps / pcie_link_gbps, 1.0) END AS link_ratio
          FROM busy)
),
ranked AS (
    SELECT *, activity_ratio >= quantile_cont(activity_ratio, 0.5) OVER (PARTITION BY gpu_model, bottleneck) AS is_heavy
    FROM classified
)
SELECT
    gpu_model, bottleneck,
    count(*) AS n_samples,
    count(*) / sum(count(*)) OVER (PARTITION BY gpu_model) AS busy_share,
    avg(activity_ratio) AS activity_ratio,
    avg(memory_ratio) AS memory_ratio,
    avg(pcie_gbps) AS pcie_gbps,
    avg(temp_c) AS temp_c,
    avg(activity_ratio) FILTER (WHERE is_heavy) AS heavy_activity_ratio,
    avg(memory_ratio) FILTER (WHERE is_heavy) AS heavy_memory_ratio,
    avg(pcie_gbps) FILTER (WHERE is_heavy) AS heavy_pcie_gbps,
    avg(temp_c) FILTER (WHERE is_heavy) AS heavy_temp_c
FROM ranked
GROUP BY gpu_model, bottleneck
ORDER BY gpu_model, bottleneck
