-- fct_link_bandwidth_hourly: how full each link was, per hour: a GPU's NVLink and PCIe, a node's
-- InfiniBand / RoCE ports.
-- kind: day
-- grain: one row per (day, hour_at, host, link_kind, device)
-- Written by models.bandwidth.link_bandwidth_day (the day's rows replaced). Inputs: raw_link_samples
-- (NVLink, network ports), gpu_activity_samples (PCIe, from the GPU's one stream), and the temp table
-- link_capacity_by_model (models/gpu_catalogue.csv: NVLink generation x links, PCIe generation x lanes).
-- Occupancy is the busier direction's mean rate over the link's rate per direction: a full-duplex
-- link that sends at its rate is full whatever it receives.
-- columns:
--   day [DATE] UTC day
--   hour_at [TIMESTAMPTZ] start of the UTC hour
--   host [text] server
--   link_kind [text] 'nvlink' | 'pcie' | 'infiniband' (RoCE ports too)
--   device [text] GPU UUID for nvlink and pcie, '<hca>/<port>' for a network port
--   gpu_uuid [text] the GPU (NULL for a network port)
--   gpu_model [text] NVML name (NULL for a network port)
--   n_samples [count] readings in the hour
--   tx_bytes_per_s [bytes/s] mean transmit rate
--   rx_bytes_per_s [bytes/s] mean receive rate
--   capacity_bytes_per_s [bytes/s] the link's rate per direction
--   capacity_basis [text] 'device' (the reading carried it) | 'catalogue' (from the GPU model)
--   occupancy_ratio [0..1] greatest(tx, rx) / capacity; NULL without a capacity
WITH links AS (
    SELECT
        date_trunc('hour', l.sampled_at) AS hour_at, l.host, l.link_kind, l.device,
        CASE WHEN l.link_kind = 'nvlink' THEN l.device END AS gpu_uuid,
        any_value(l.gpu_model) AS gpu_model,
        count(*) AS n_samples,
        avg(l.tx_bytes_per_s) AS tx_bytes_per_s,
        avg(l.rx_bytes_per_s) AS rx_bytes_per_s,
        avg(l.capacity_bytes_per_s) AS device_capacity_bytes_per_s
    FROM raw_link_samples AS l
    WHERE l.date = $day AND CAST(l.sampled_at AS DATE) = $day
      AND (l.tx_bytes_per_s IS NOT NULL OR l.rx_bytes_per_s IS NOT NULL)
    GROUP BY ALL
),
pcie AS (
    SELECT
        date_trunc('hour', sampled_at) AS hour_at, host, 'pcie' AS link_kind, gpu_uuid AS device, gpu_uuid,
        any_value(gpu_model) AS gpu_model,
        count(*) AS n_samples,
        avg(pcie_tx_bytes_per_s) AS tx_bytes_per_s,
        avg(pcie_rx_bytes_per_s) AS rx_bytes_per_s,
        CAST(NULL AS DOUBLE) AS device_capacity_bytes_per_s
    FROM gpu_activity_samples
    WHERE day = $day AND (pcie_tx_bytes_per_s IS NOT NULL OR pcie_rx_bytes_per_s IS NOT NULL)
    GROUP BY ALL
),
both_kinds AS (
    SELECT * FROM links
    UNION ALL BY NAME
    SELECT * FROM pcie
),
sized AS (
    SELECT
        b.*,
        coalesce(b.device_capacity_bytes_per_s,
                 CASE b.link_kind WHEN 'nvlink' THEN c.nvlink_capacity_bytes_per_s
                                  WHEN 'pcie' THEN c.pcie_capacity_bytes_per_s END) AS capacity_bytes_per_s,
        CASE WHEN b.device_capacity_bytes_per_s IS NOT NULL THEN 'device'
             WHEN b.link_kind IN ('nvlink', 'pcie') AND c.gpu_model IS NOT NULL THEN 'catalogue' END AS capacity_basis
    FROM both_kinds AS b
    LEFT JOIN link_capacity_by_model AS c ON c.gpu_model = b.gpu_model
)
SELECT
    CAST($day AS DATE) AS day, hour_at, host, link_kind, device, gpu_uuid, gpu_model, n_samples,
    tx_bytes_per_s, rx_bytes_per_s, capacity_bytes_per_s,
    CASE WHEN capacity_bytes_per_s IS NOT NULL THEN capacity_basis END AS capacity_basis,
    greatest(coalesce(tx_bytes_per_s, 0), coalesce(rx_bytes_per_s, 0)) / nullif(capacity_bytes_per_s, 0) AS occupancy_ratio
FROM sized
ORDER BY hour_at, host, link_kind, device
