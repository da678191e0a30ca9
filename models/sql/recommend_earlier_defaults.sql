-- recommend_earlier_defaults: the highest default power limit earlier days' recommendations used
-- per GPU. Once the agent applies a cap, that day's readings show only the cap, so the earlier
-- days' figure is kept (without it the default would follow the caps down, and the floor with it):
-- a GPU's own (models.device_limits: boards of one NVML name may be built for 400 or 500 W), and for
-- a model with no known limits, whose default is the highest limit seen, its GPUs' highest.
-- Parameters: $day DATE (days before it are read).
-- Columns: gpu_uuid, gpu_model, default_limit_w (W).
SELECT gpu_uuid, gpu_model, max(default_limit_w) AS default_limit_w
FROM fct_recommendation
WHERE day < $day AND default_limit_w IS NOT NULL AND gpu_uuid IS NOT NULL
GROUP BY gpu_uuid, gpu_model
