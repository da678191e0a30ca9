-- outcome_recommendation: the fct_recommendation row that gave a GPU a limit before a change took
-- effect (the latest before the change with that limit). models.outcome_matched takes the
-- prediction from it, models.outcome_reprediction the day whose fit and the clock lock it scored.
-- params: $gpu_uuid [text] GPU, $effective_day [DATE] first whole day under the new limit,
--   $limit_w [W] the limit recommended (within 0.5 W)
-- columns: day [DATE] day recommended on, expected_saving_pct [%], expected_slowdown_pct [%],
--   default_limit_w [W], locked_sm_clock_max_mhz [MHz] (NULL: no clock lock)
SELECT day, expected_saving_pct, expected_slowdown_pct, default_limit_w, locked_sm_clock_max_mhz
FROM fct_recommendation
WHERE gpu_uuid = $gpu_uuid AND day < $effective_day AND abs(power_limit_w - $limit_w) < 0.5
ORDER BY day DESC
LIMIT 1
