-- day_completed: the daily run finished its last step for the day's current build
-- (fct_warehouse_build_daily.completed_at; a rebuild of the day sets it back to NULL).
-- parameters: $day [DATE], $completed_at [TIMESTAMPTZ, UTC]
UPDATE fct_warehouse_build_daily
SET completed_at = $completed_at::TIMESTAMPTZ
WHERE day = $day::DATE
