-- fct_gpu_coverage_daily_rows: the day's rows of fct_gpu_coverage_daily (one per GPU), only the
-- columns the checks read, plus every inventory GPU in the fleet that day that sent no reading at
-- all (coverage 0, stale the whole day): fct_gpu_coverage_daily has a row only for a GPU the lake
-- read, so a dead GPU or a broken collector, what a coverage check most needs to see, passed every
-- check. Not a warehouse relation (no `kind:`): read by warehouse.checks only.
-- Without an inventory (the default), a GPU read on at least 2 of the 7 days before and not this
-- day is one too: 9 of 10 GPUs silent had passed every check (review, helper-93). One day's
-- reading (an imported trace) makes no fleet GPU.
-- grain: one row per gpu_uuid with readings that day, or in the inventory and in the fleet that day,
--   or (not in an inventory) read on 2 of the 7 days before
-- parameters: $day [DATE] the day checked
-- columns:
--   gpu_uuid [text] GPU
--   coverage_ratio [0..1] share of the day covered by readings
--   staleness_s [s] from the last clean reading to the end of the day
WITH read AS (
    SELECT gpu_uuid, coverage_ratio, staleness_s
    FROM fct_gpu_coverage_daily
    WHERE day = $day::DATE
)
SELECT * FROM read
UNION ALL
SELECT d.gpu_uuid, 0.0 AS coverage_ratio, 86400.0 AS staleness_s
FROM dim_gpu AS d
ANTI JOIN read AS r ON r.gpu_uuid = d.gpu_uuid
WHERE d.in_inventory
  AND (d.purchased_on IS NULL OR d.purchased_on <= $day::DATE)
  AND (d.retired_on IS NULL OR d.retired_on > $day::DATE)
UNION ALL
SELECT d.gpu_uuid, 0.0 AS coverage_ratio, 86400.0 AS staleness_s
FROM dim_gpu AS d
ANTI JOIN read AS r ON r.gpu_uuid = d.gpu_uuid
WHERE NOT coalesce(d.in_inventory, false)
  AND d.gpu_uuid IN (
      SELECT gpu_uuid FROM fct_gpu_coverage_daily
      WHERE day >= $day::DATE - 7 AND day < $day::DATE
      GROUP BY gpu_uuid
      HAVING count(DISTINCT day) >= 2
  )
