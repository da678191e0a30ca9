-- rpt_shift_opportunity_daily: per deferrable job, the carbon and energy-cost saving had it run
-- in the cleanest / cheapest hours of its day.
-- kind: view
-- grain: one row per (day, site, job_id)
-- Rules: rpt_shift_carbon_daily, rpt_shift_cost_daily; the two plans are made separately, so the
-- cleanest and cheapest hours can differ. A column is NULL where its account was not run.
-- columns:
--   day [DATE] UTC day
--   site [text] site
--   team [text] team of the job
--   job_id [text] deferrable job
--   energy_kwh [kWh] the job's IT energy
--   gpu_hours [GPU-hours] the job's GPU time
--   carbon_saving_gco2e [gCO2e] carbon saved by the cleanest-hours plan
--   cost_saving_usd [USD] energy cost saved by the cheapest-hours plan
--   best_carbon_hour_at [TIMESTAMPTZ, UTC] the hour taking most of the job in the carbon plan
--   best_cost_hour_at [TIMESTAMPTZ, UTC] the hour taking most of the job in the cost plan
--   carbon_gco2e [gCO2e] location-based, as run
--   energy_cost_usd [USD] energy cost as run
CREATE OR REPLACE VIEW rpt_shift_opportunity_daily AS
WITH carbon AS (
    SELECT * FROM rpt_shift_carbon_daily
),
cost AS (
    SELECT * FROM rpt_shift_cost_daily
),
joined AS (
    SELECT
        coalesce(carbon.day, cost.day) AS day,
        coalesce(carbon.site, cost.site) AS site,
        coalesce(carbon.team, cost.team) AS team,
        coalesce(carbon.job_id, cost.job_id) AS job_id,
        coalesce(carbon.energy_kwh, cost.energy_kwh) AS energy_kwh,
        coalesce(carbon.gpu_hours, cost.gpu_hours) AS gpu_hours,
        carbon.carbon_saving_gco2e,
        cost.cost_saving_usd,
        carbon.best_carbon_hour_at,
        cost.best_cost_hour_at,
        carbon.carbon_gco2e,
        cost.energy_cost_usd
    FROM carbon
    FULL OUTER JOIN cost
        ON carbon.day = cost.day AND carbon.site = cost.site AND carbon.job_id = cost.job_id
)
SELECT * FROM joined
