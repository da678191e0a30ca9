-- power_previous_fit: the latest fit of a GPU model before a day that has coefficients, for the
-- drift check. Read by models.power_store. Parameters: $gpu_model VARCHAR, $day DATE.
-- Columns: static_w [W], dyn_w [W], mem_w [W].
SELECT static_w, dyn_w, mem_w
FROM fct_power_model
WHERE gpu_model = $gpu_model AND day < $day AND static_w IS NOT NULL
ORDER BY day DESC, fitted_at DESC
LIMIT 1
