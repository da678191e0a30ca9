-- power_latest_fit: the latest fct_power_model row of a GPU model on or before a day (any day when
-- $day is NULL). Read by models.power_store.load_fit. Parameters: $gpu_model VARCHAR, $day DATE.
SELECT *
FROM fct_power_model
WHERE gpu_model = $gpu_model AND (CAST($day AS DATE) IS NULL OR day <= $day)
ORDER BY day DESC, fitted_at DESC
LIMIT 1
