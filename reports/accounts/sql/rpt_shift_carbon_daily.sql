-- rpt_shift_carbon_daily: what moving each deferrable job to the cleanest hours would have saved;
-- the carbon half of rpt_shift_opportunity_daily.
-- kind: day
-- grain: one row per (day, site, job_id)
-- Written by reports.accounts.carbon.carbon_day (reports.accounts.shift). Rule: the job's IT energy is moved,
-- unchanged in amount, GPU-hour by GPU-hour to the hours of the same UTC day (within
-- shift_window_hours of its own hours when that is > 0) with the lowest PUE x grid intensity,
-- each hour taking at most the site's idle GPU-hours left in it; larger jobs choose first; a plan
-- that saves nothing keeps the job where it ran.
-- columns:
--   day [DATE] UTC day
--   site [text] site
--   team [text] team of the job
--   job_id [text] deferrable job
--   energy_kwh [kWh] the job's IT energy
--   gpu_hours [GPU-hours] the job's GPU time
--   carbon_gco2e [gCO2e] location-based, as run
--   shifted_carbon_gco2e [gCO2e] as planned
--   carbon_saving_gco2e [gCO2e] as run - as planned (>= 0)
--   moved_gpu_hours [GPU-hours] placed in other hours
--   best_carbon_hour_at [TIMESTAMPTZ, UTC] the hour taking most of the job in the plan
CREATE TABLE IF NOT EXISTS rpt_shift_carbon_daily (
    day DATE NOT NULL,
    site VARCHAR NOT NULL,
    team VARCHAR,
    job_id VARCHAR NOT NULL,
    energy_kwh DOUBLE,
    gpu_hours DOUBLE,
    carbon_gco2e DOUBLE,
    shifted_carbon_gco2e DOUBLE,
    carbon_saving_gco2e DOUBLE,
    moved_gpu_hours DOUBLE,
    best_carbon_hour_at TIMESTAMPTZ
)
