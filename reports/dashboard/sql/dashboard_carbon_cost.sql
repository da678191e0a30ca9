-- dashboard_carbon_cost: carbon (location- and market-based, embodied apart) and cost of every day
-- the warehouse holds, per period ($period: 'week' | 'month', UTC, weeks from Monday) and per team,
-- GPU model and site. A job's rows are split over the GPU models and sites it ran on by its GPU
-- energy there (fct_job_efficiency, dim_gpu). The idle line (job 'unallocated': what no job held)
-- is split the same way, by the GPU energy no job held on each model and site (the day's GPU
-- board energy in fct_gpu_energy_hourly less the jobs'): its GPUs and their models are known, so
-- 'unallocated' stays a team, never a model or a site. A GPU outside the inventory has no site:
-- 'not in inventory'. Only a day without any GPU energy keeps 'unallocated' there.
-- Inputs: rpt_carbon_daily, rpt_tco_daily, fct_job_efficiency, fct_gpu_energy_hourly, dim_gpu
--   (stand-ins when absent).
-- Columns: period_start [DATE], dimension [text] 'team' | 'gpu_model' | 'site', value [text],
--   location_gco2e, market_gco2e, embodied_gco2e [gCO2e], total_cost_usd [USD],
--   it_energy_kwh [kWh] IT energy as rpt_carbon_daily counts it (the servers' BMC energy split by
--   GPU share where usable, else GPU board energy), days [count].
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
gpu_days AS (
    SELECT g.day, g.gpu_model, d.site, sum(g.energy_kwh) AS kwh
    FROM fct_gpu_energy_hourly AS g LEFT JOIN dim_gpu AS d USING (gpu_uuid)
    WHERE g.energy_kwh > 0
    GROUP BY ALL
),
job_days AS (
    SELECT day, gpu_model, site, sum(kwh) AS kwh FROM job_gpus GROUP BY ALL
),
idle_gpus AS (
    -- what no job held of each model's and site's GPU energy that day
    SELECT g.day, 'unallocated' AS job_id, g.gpu_model, g.site, g.kwh - coalesce(j.kwh, 0) AS kwh
    FROM gpu_days AS g
    LEFT JOIN job_days AS j
      ON g.day = j.day AND g.gpu_model IS NOT DISTINCT FROM j.gpu_model AND g.site IS NOT DISTINCT FROM j.site
),
shares AS (
    SELECT day, job_id, gpu_model, site, kwh / sum(kwh) OVER (PARTITION BY day, job_id) AS share
    FROM (SELECT * FROM job_gpus UNION ALL SELECT * FROM idle_gpus WHERE kwh > 0)
),
split AS (
    SELECT c.day, coalesce(c.team, 'not reported') AS team,
           CASE WHEN s.job_id IS NULL THEN 'unallocated' ELSE coalesce(s.gpu_model, 'unknown model') END AS gpu_model,
           CASE WHEN s.job_id IS NULL THEN 'unallocated' ELSE coalesce(s.site, 'not in inventory') END AS site,
           coalesce(s.share, 1.0) AS share,
           c.location_gco2e, c.market_gco2e, c.embodied_gco2e, c.energy_kwh AS it_energy_kwh,
           coalesce(t.total_cost_usd, 0) AS total_cost_usd
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
    sum(share * it_energy_kwh) AS it_energy_kwh, count(DISTINCT day) AS days
FROM long
GROUP BY ALL
ORDER BY dimension, period_start, value
