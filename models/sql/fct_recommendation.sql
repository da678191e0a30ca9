-- fct_recommendation: one recommended power setting per GPU per day.
-- kind: day
-- grain: one row per (day, gpu_uuid)
-- Written by models.recommend.recommend_day (delete-then-insert for the day).
-- columns:
--   day [DATE] UTC day the recommendation is based on
--   host [text] server the GPU sits in
--   gpu_uuid [text] GPU
--   gpu_model [text] NVML name
--   workload_class [text] latency-sensitive | throughput | background
--   power_limit_w [W] recommended limit (NULL when the GPU is skipped)
--   default_limit_w [W] the GPU's default limit: its model's (the GPU catalogue), or a higher one its board held
--     (models.device_limits: the readings, the agent's audit before its first setting, earlier days)
--   locked_sm_clock_min_mhz [MHz] lower end of a suggested SM clock range (set instead of a cap)
--   locked_sm_clock_max_mhz [MHz] upper end of that range
--   expected_saving_pct [%] of the GPU's busy energy
--   expected_energy_saving_kwh_per_day [kWh/day] expected saving
--   expected_slowdown_pct [%] expected loss of speed
--   reason [text] why this setting, or why none
--   price_usd_per_kwh [USD/kWh] the energy price the setting was chosen at (the GPU's hours of
--     rpt_context_hourly, energy-weighted; see energy_price_basis)
--   grid_gco2e_per_kwh [gCO2e/kWh] the grid intensity it was chosen at
--   pue [ratio] the PUE it was chosen at
--   carbon_price_usd_per_tco2e [USD/tCO2e] the carbon price it was chosen at ([carbon] settings)
--   energy_price_basis [text] 'hourly context' | 'hourly context, defaults where it had none' |
--     'defaults (no hourly context)' | 'given'
--   demand_charge_usd_per_kw_month [USD/kW-month] the demand charge it was chosen at ([tco]; 0: none)
CREATE TABLE IF NOT EXISTS fct_recommendation (
    day DATE NOT NULL,
    host VARCHAR NOT NULL,
    gpu_uuid VARCHAR NOT NULL,
    gpu_model VARCHAR,
    workload_class VARCHAR,
    power_limit_w DOUBLE,
    default_limit_w DOUBLE,
    locked_sm_clock_min_mhz DOUBLE,
    locked_sm_clock_max_mhz DOUBLE,
    expected_saving_pct DOUBLE,
    expected_energy_saving_kwh_per_day DOUBLE,
    expected_slowdown_pct DOUBLE,
    reason VARCHAR,
    price_usd_per_kwh DOUBLE,
    grid_gco2e_per_kwh DOUBLE,
    pue DOUBLE,
    carbon_price_usd_per_tco2e DOUBLE,
    energy_price_basis VARCHAR,
    demand_charge_usd_per_kw_month DOUBLE
)
