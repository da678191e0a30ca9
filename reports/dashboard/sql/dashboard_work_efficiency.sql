-- dashboard_work_efficiency: energy per unit of work per day and GPU model ('fleet' for all), every day held.
-- Inputs: fct_job_efficiency, fct_flops_per_watt_daily (stand-ins when absent).
-- Columns: day [DATE], gpu_model [text], j_per_token [J/token], j_per_request [J/request],
--   j_per_sample [J/sample], fp16_equivalent_flops_per_w [FLOP/J], goal_flops_per_w [FLOP/J].
WITH measured AS (
    -- the work of the part of each run the energy was measured over (as fct_job_efficiency's own
    -- ratios); a table of before measured_hours (BY NAME: NULL there) counts its runs whole
    SELECT day, gpu_model, energy_kwh, tokens_total * measured_ratio AS tokens_total,
           requests_total * measured_ratio AS requests_total, samples_total * measured_ratio AS samples_total
    FROM (
        SELECT *, coalesce(measured_hours / nullif(busy_hours, 0), 1.0) AS measured_ratio
        FROM (SELECT * FROM fct_job_efficiency
              UNION ALL BY NAME
              SELECT CAST(NULL AS DOUBLE) AS measured_hours, CAST(NULL AS DOUBLE) AS busy_hours WHERE false)
    )
    WHERE gpu_model IS NOT NULL
),
per_model AS (
    SELECT day, gpu_model,
           sum(energy_kwh) FILTER (WHERE tokens_total > 0) * 3.6e6 / nullif(sum(tokens_total), 0) AS j_per_token,
           sum(energy_kwh) FILTER (WHERE requests_total > 0) * 3.6e6 / nullif(sum(requests_total), 0) AS j_per_request,
           sum(energy_kwh) FILTER (WHERE samples_total > 0) * 3.6e6 / nullif(sum(samples_total), 0) AS j_per_sample
    FROM measured GROUP BY ALL
)
SELECT coalesce(p.day, f.day) AS day, coalesce(p.gpu_model, f.gpu_model) AS gpu_model,
       p.j_per_token, p.j_per_request, p.j_per_sample, f.fp16_equivalent_flops_per_w, f.goal_flops_per_w
FROM per_model AS p
FULL JOIN fct_flops_per_watt_daily AS f ON f.day = p.day AND f.gpu_model = p.gpu_model
ORDER BY 2, 1
