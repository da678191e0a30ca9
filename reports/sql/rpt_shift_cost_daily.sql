-- rpt_shift_cost_daily: what moving each deferrable job to the cheapest hours would have saved
-- on the energy bill (reports.shift, written by tco_day). Same rule as rpt_shift_carbon_daily
-- with PUE x price in place of PUE x intensity; demand charges and uplifts are not re-planned.
-- Grain: one row per (day, site, job_id). team, energy_kwh (kWh IT), gpu_hours (GPU-hours),
-- energy_cost_usd (USD as run), shifted_energy_cost_usd (USD as planned), cost_saving_usd
-- (USD, >= 0), moved_gpu_hours (GPU-hours), best_cost_hour_at (TIMESTAMPTZ, UTC).
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
