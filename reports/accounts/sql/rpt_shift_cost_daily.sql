-- rpt_shift_cost_daily: what moving each deferrable job to the cheapest hours would have saved on
-- the energy bill; the cost half of rpt_shift_opportunity_daily.
-- kind: day
-- grain: one row per (day, site, job_id)
-- Written by reports.accounts.tco.tco_day (reports.accounts.shift). Same rule as rpt_shift_carbon_daily with PUE x
-- price in place of PUE x intensity; demand charges and uplifts are not re-planned.
-- columns:
--   day [DATE] UTC day
--   site [text] site
--   team [text] team of the job
--   job_id [text] deferrable job
--   energy_kwh [kWh] the job's IT energy
--   gpu_hours [GPU-hours] the job's GPU time
--   energy_cost_usd [USD] as run
--   shifted_energy_cost_usd [USD] as planned
--   cost_saving_usd [USD] as run - as planned (>= 0)
--   moved_gpu_hours [GPU-hours] placed in other hours
--   best_cost_hour_at [TIMESTAMPTZ, UTC] the hour taking most of the job in the plan
CREATE TABLE IF NOT EXISTS rpt_shift_cost_daily (
    day DATE NOT NULL,
    site VARCHAR NOT NULL,
    team VARCHAR,
    job_id VARCHAR NOT NULL,
    energy_kwh DOUBLE,
    gpu_hours DOUBLE,
    energy_cost_usd DOUBLE,
    shifted_energy_cost_usd DOUBLE,
    cost_saving_usd DOUBLE,
    moved_gpu_hours DOUBLE,
    best_cost_hour_at TIMESTAMPTZ
)
