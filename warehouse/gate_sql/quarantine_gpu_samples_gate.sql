-- quarantine_gpu_samples_gate: the blocking rule on one day of quarantine_gpu_samples, counted:
-- every quarantined reading carries one of the known reasons.
-- Not a warehouse relation (no `kind:`): read by warehouse.gate only.
-- grain: one row for the day
-- parameters: $day [DATE] the day checked; $known_reasons [list of text] the quarantine rules
-- columns:
--   n_rows [count] quarantined rows of the day
--   unknown_reason_rows [count] rows whose reason is not one of $known_reasons, or NULL (a row
--     quarantined for no reason; list_contains of NULL is NULL, and it had passed)
--   unknown_reason_examples [list] up to 3 such reasons
SELECT
    count(*) AS n_rows,
    count(*) FILTER (WHERE NOT coalesce(list_contains($known_reasons, reason), false)) AS unknown_reason_rows,
    list(DISTINCT coalesce(reason, 'NULL') ORDER BY 1) FILTER (WHERE NOT coalesce(list_contains($known_reasons, reason), false))[1:3]
        AS unknown_reason_examples
FROM quarantine_gpu_samples
WHERE day = $day::DATE
