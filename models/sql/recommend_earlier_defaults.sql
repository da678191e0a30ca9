-- recommend_earlier_defaults: the highest default power limit earlier days' recommendations used
-- per GPU model. For a model with no known limits the default is the highest limit seen; once the
-- agent applies a cap, that day's readings show only the cap, so the earlier days' figure is kept
-- (without it the default would follow the caps down, and the floor with it).
-- Parameters: $day DATE (days before it are read).
-- Columns: gpu_model, default_limit_w (W).
SELECT gpu_model, max(default_limit_w) AS default_limit_w
FROM fct_recommendation
WHERE day < $day AND default_limit_w IS NOT NULL
GROUP BY gpu_model
