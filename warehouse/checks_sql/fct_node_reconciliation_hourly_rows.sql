-- fct_node_reconciliation_hourly_rows: the day's rows of fct_node_reconciliation_hourly (one per
-- host-hour), only the columns the checks read. Not a warehouse relation (no `kind:`).
-- grain: one row per (hour_at, host) of the day
-- parameters: $day [DATE] the day checked
-- columns:
--   residual_share [ratio] share of the server's BMC energy its GPUs do not explain
SELECT residual_share
FROM fct_node_reconciliation_hourly
WHERE day = $day::DATE
