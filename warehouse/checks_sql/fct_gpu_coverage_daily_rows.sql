-- fct_gpu_coverage_daily_rows: the day's rows of fct_gpu_coverage_daily (one per GPU), only the
-- columns the checks read. Not a warehouse relation (no `kind:`): read by warehouse.checks only.
-- grain: one row per gpu_uuid with readings that day
-- parameters: $day [DATE] the day checked
-- columns:
--   gpu_uuid [text] GPU
--   coverage_ratio [0..1] share of the day covered by readings
--   staleness_s [s] from the last clean reading to the end of the day
SELECT gpu_uuid, coverage_ratio, staleness_s
FROM fct_gpu_coverage_daily
WHERE day = $day::DATE
