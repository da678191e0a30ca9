-- headline_coverage: how completely the day's GPUs were observed. Parameters: $day (DATE).
-- columns: coverage_ratio [0..1] mean over GPUs of fct_gpu_coverage_daily.coverage_ratio;
--   gpus [count] GPUs with any reading that day (NULL when none)
SELECT avg(coverage_ratio) AS coverage_ratio, CASE WHEN count(*) > 0 THEN count(*) END AS gpus
FROM fct_gpu_coverage_daily
WHERE day = $day
