-- recommend_fitted_models: the GPU models with a power fit in fct_power_model on or before $day
-- (models.recommend reads each one's latest with models.power_store.load_fit, before the day's
-- profiles: their tenths are built on the activity measure that fit reads).
-- Parameters: $day DATE. Columns: gpu_model [text].
SELECT DISTINCT gpu_model
FROM fct_power_model
WHERE day <= $day
ORDER BY gpu_model
