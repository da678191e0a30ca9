-- dashboard_carbon_cost: carbon (location- and market-based, embodied apart) and cost of every day
-- the warehouse holds, per period ($period: 'week' | 'month', UTC, weeks from Monday) and per team,
-- GPU model and site. A job's rows are split over the GPU models and sites it ran on by its GPU
-- energy there (fct_job_efficiency, dim_gpu); what no job held (the 'unallocated' idle line) keeps
-- 'unallocated' for GPU model and site.
-- Inputs: rpt_carbon_daily, rpt_tco_daily, fct_job_efficiency, dim_gpu (stand-ins when absent).
-- Columns: period_start [DATE], dimension [text] 'team' | 'gpu_model' | 'site', value [text],
--   location_gco2e, market_gco2e, embodied_gco2e [gCO2e], total_cost_usd [USD], energy_kwh [kWh], days [count].
WITH carbon AS (
    SELECT day, job_id, any_value(team) AS team, sum(location_gco2e) AS location_gco2e,
           sum(market_gco2e) AS market_gco2e, sum(embodied_gco2e) AS embodied_gco2e, sum(energy_kwh) AS energy_kwh
    FROM rpt_carbon_daily GROUP BY day, job_id
),
cost AS (
    SELECT day, job_id, sum(total_cost_usd) AS total_cost_usd FROM rpt_tco_daily GROUP BY day, job_id
),
job_gpus AS (
    SELECT e.day, e.job_id, e.gpu_model, d.site, sum(e.energy_kwh) AS kwh
    FROM fct_job_efficiency AS e LEFT JOIN dim_gpu AS d USING (gpu_uuid)
    WHERE e.energy_kwh > 0
    GROUP BY ALL
),
shares AS (
    SELECT day, job_id, gpu_model, site, kwh / sum(kwh) OVER (PARTITION BY day, job_id) AS share FROM job_gpus
),
split AS (
    SELECT c.day, coalesce(c.team, 'not reported') AS team, coalesce(s.gpu_model, 'unallocated') AS gpu_model,
           coalesce(s.site, 'unallocated') AS site, coalesce(s.share, 1.0) AS share,
           c.location_gco2e, c.market_gco2e, c.embodied_gco2e, c.energy_kwh, coalesce(t.total_cost_usd, 0) AS total_cost_usd
    FROM carbon AS c
    LEFT JOIN cost AS t USING (day, job_id)
    LEFT JOIN shares AS s USING (day, job_id)
),
long AS (
    SELECT day, 'team' AS dimension, team AS value, * EXCLUDE (day, team, gpu_model, site) FROM split
    UNION ALL
    SELECT day, 'gpu_model', gpu_model, * EXCLUDE (day, team, gpu_model, site) FROM split
    UNION ALL
    SELECT day, 'site', site, * EXCLUDE (day, team, gpu_model, site) FROM split
)
SELECT
    CAST(date_trunc(CAST($period AS VARCHAR), day) AS DATE) AS period_start, dimension, value,
    sum(share * location_gco2e) AS location_gco2e, sum(share * market_gco2e) AS market_gco2e,
    sum(share * embodied_gco2e) AS embodied_gco2e, sum(share * total_cost_usd) AS total_cost_usd,
    sum(share * energy_kwh) AS energy_kwh, count(DISTINCT day) AS days
FROM long
GROUP BY ALL
ORDER BY dimension, period_start, value
