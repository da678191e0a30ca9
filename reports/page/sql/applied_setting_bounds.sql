-- The workload class and its slowdown bound of each GPU whose setting the day's outcome measures
-- (fct_recommendation_outcome, scope 'gpu'): the class of the recommendation that gave the GPU
-- its new limit (the latest before the change with that limit, the row models.outcome_matched
-- takes its prediction from), and the bound that day's recommender kept within
-- (fct_power_interval.max_slowdown_pct, [recommend] max_slowdown_*_pct as the day ran).
-- recommended_day is that recommendation's day (its prediction is of that day's work); workload_class,
-- max_slowdown_pct or recommended_day is NULL where no such row was kept.
-- params: $day [DATE] the day measured up to
WITH measured AS (
    SELECT gpu_uuid, effective_day, power_limit_w_after
    FROM fct_recommendation_outcome
    WHERE day = $day AND scope = 'gpu'
),
applied AS (
    SELECT m.gpu_uuid, m.effective_day, r.day AS recommended_day, r.workload_class
    FROM measured AS m
    JOIN fct_recommendation AS r
      ON r.gpu_uuid = m.gpu_uuid AND r.day < m.effective_day AND abs(r.power_limit_w - m.power_limit_w_after) < 0.5
    QUALIFY row_number() OVER (PARTITION BY m.gpu_uuid, m.effective_day ORDER BY r.day DESC) = 1
),
bounds AS (
    SELECT day, workload_class, max(max_slowdown_pct) AS max_slowdown_pct
    FROM fct_power_interval
    GROUP BY day, workload_class
)
SELECT a.gpu_uuid, a.effective_day, a.workload_class, b.max_slowdown_pct, a.recommended_day
FROM applied AS a
LEFT JOIN bounds AS b ON b.day = a.recommended_day AND b.workload_class = a.workload_class
ORDER BY a.gpu_uuid, a.effective_day
