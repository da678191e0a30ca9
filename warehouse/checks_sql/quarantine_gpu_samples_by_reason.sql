-- quarantine_gpu_samples_by_reason: one day of quarantine_gpu_samples folded to its distinct
-- reasons, so that Great Expectations checks each reason once instead of once per row.
-- Not a warehouse relation (no `kind:`): read by warehouse.checks only.
-- grain: one row per distinct reason of the day (none when nothing was quarantined)
-- parameters: $day [DATE] the day checked
-- columns:
--   reason [text] quarantine rule (NULL kept as its own row)
--   n_rows [count] quarantined rows with that reason
SELECT reason, count(*) AS n_rows
FROM quarantine_gpu_samples
WHERE day = $day::DATE
GROUP BY reason
ORDER BY reason
