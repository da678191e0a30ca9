-- dashboard_carbon_cost: carbon (location- and market-based, embodied apart) and cost of every day
-- the warehouse holds, per period ($period: 'week' | 'month', UTC, weeks from Monday) and per team,
-- GPU model and site. Each job's (and the idle line's) amounts on each GPU model and site are the
-- accounts' own, summed GPU-hour by GPU-hour (rpt_carbon_by_gpu_daily, rpt_tco_by_gpu_daily): a
-- GPU's carbon and cost stay its own, whatever its IT energy basis (a server's BMC overhead is
-- never charged to another server's GPUs). 'unallocated' stays a team, never a model or a site.
-- A GPU outside the inventory has no site: 'not in inventory'; a GPU without a model: 'GPU model not
-- reported' (the daily report's words, reports.warehouse_tables.UNKNOWN_GPU_MODEL).
-- Days accounted before those tables were kept (a day absent from them) fall back to an
-- approximation: a job's rows split over the GPU models and sites it ran on by its GPU board energy
-- there (fct_job_efficiency, dim_gpu), the idle line by the board energy no job held on each model
-- and site (fct_gpu_energy_hourly less the jobs'). That moves BMC overhead (in the IT energy of
-- servers with a usable BMC) onto GPUs counted at board energy; re-account such days to make them exact.
-- Only a fallback day without any GPU energy keeps 'unallocated' as a model and a site.
-- Inputs: rpt_carbon_daily, rpt_tco_daily, rpt_carbon_by_gpu_daily, rpt_tco_by_gpu_daily,
--   fct_job_efficiency, fct_gpu_energy_hourly, dim_gpu (stand-ins when absent).
-- market_gco2e is NULL for a period that holds a day without a market-based figure (the accounts
-- leave such a day's NULL): a sum over the other days would read as the period's whole market-based
-- carbon, the missing day counted as 0; market_missing_days says how many such days the period holds
-- (a row without measured energy misses nothing). Likewise total_cost_usd is NULL for a period
-- holding a carbon-accounted day without cost accounts (rpt_tco_daily has no row of it; a 0 made
-- 30 of 40 days' cost read as the whole), and cost_missing_days counts them.
-- Columns: period_start [DATE], dimension [text] 'team' | 'gpu_model' | 'site', value [text],
--   location_gco2e, market_gco2e, embodied_gco2e [gCO2e], total_cost_usd [USD],
--   it_energy_kwh [kWh] IT energy as rpt_carbon_daily counts it (the servers' BMC energy split by
--   GPU share where usable, else GPU board energy), days [count], market_missing_days [count],
--   cost_missing_days [count].
WITH carbon AS (
    SELECT day, job_id, any_value(team) AS team, sum(location_gco2e) AS location_gco2e,
           sum(market_gco2e) AS market_gco2e, bool_or(market_gco2e IS NULL AND energy_kwh IS NOT NULL) AS market_missing,
           sum(embodied_gco2e) AS embodied_gco2e, sum(energy_kwh) AS energy_kwh
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
exact_carbon_days AS (SELECT DISTINCT day FROM rpt_carbon_by_gpu_daily),
exact_cost_days AS (SELECT DISTINCT day FROM rpt_tco_by_gpu_daily),
costed_days AS (SELECT DISTINCT day FROM rpt_tco_daily),
approx AS (
    -- days without the accounts' own split: by GPU board energy share (see the header)
    SELECT c.day, c.job_id,
           CASE WHEN s.job_id IS NULL THEN 'unallocated' ELSE coalesce(s.gpu_model, 'GPU model not reported') END AS gpu_model,
           CASE WHEN s.job_id IS NULL THEN 'unallocated' ELSE coalesce(s.site, 'not in inventory') END AS site,
           coalesce(s.share, 1.0) AS share,
           c.location_gco2e, c.market_gco2e, c.market_missing, c.embodied_gco2e, c.energy_kwh AS it_energy_kwh,
           t.total_cost_usd, c.day NOT IN (SELECT day FROM costed_days) AS cost_missing
    FROM carbon AS c
    LEFT JOIN cost AS t USING (day, job_id)
    LEFT JOIN shares AS s USING (day, job_id)
),
amounts AS (
    -- market_missing: a carbon row without its market-based figure (cost rows have none to miss)
    SELECT day, job_id, gpu_model, site, share * location_gco2e AS location_gco2e, share * market_gco2e AS market_gco2e,
           market_missing, share * embodied_gco2e AS embodied_gco2e, share * it_energy_kwh AS it_energy_kwh,
           0.0 AS total_cost_usd, false AS cost_missing
    FROM approx WHERE day NOT IN (SELECT day FROM exact_carbon_days)
    UNION ALL
    SELECT day, job_id, gpu_model, site, NULL, NULL, false, NULL, NULL, share * total_cost_usd, cost_missing
    FROM approx WHERE day NOT IN (SELECT day FROM exact_cost_days)
    UNION ALL
    SELECT day, job_id, coalesce(gpu_model, 'GPU model not reported'), coalesce(site, 'not in inventory'),
           location_gco2e, market_gco2e, market_gco2e IS NULL AND energy_kwh IS NOT NULL, embodied_gco2e, energy_kwh, 0.0,
           false
    FROM rpt_carbon_by_gpu_daily
    UNION ALL
    SELECT day, job_id, coalesce(gpu_model, 'GPU model not reported'), coalesce(site, 'not in inventory'),
           NULL, NULL, false, NULL, NULL, total_cost_usd, false
    FROM rpt_tco_by_gpu_daily
),
split AS (
    -- the jobs of rpt_carbon_daily only, with their team (as the approximation's join keeps them)
    SELECT a.day, coalesce(c.team, 'not reported') AS team, a.gpu_model, a.site,
           a.location_gco2e, a.market_gco2e, a.market_missing, a.embodied_gco2e, a.it_energy_kwh, a.total_cost_usd,
           a.cost_missing
    FROM amounts AS a JOIN carbon AS c USING (day, job_id)
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
    sum(location_gco2e) AS location_gco2e,
    CASE WHEN NOT bool_or(market_missing) THEN sum(market_gco2e) END AS market_gco2e,
    sum(embodied_gco2e) AS embodied_gco2e,
    CASE WHEN NOT bool_or(cost_missing) THEN sum(total_cost_usd) END AS total_cost_usd,
    sum(it_energy_kwh) AS it_energy_kwh, count(DISTINCT day) AS days,
    count(DISTINCT day) FILTER (WHERE market_missing) AS market_missing_days,
    count(DISTINCT day) FILTER (WHERE cost_missing) AS cost_missing_days
FROM long
GROUP BY ALL
ORDER BY dimension, period_start, value
