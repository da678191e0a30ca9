-- fct_power_model: the fitted power model of each GPU model on each day, with its held-out
-- quality and the gate that decides whether the export may rely on it.
-- kind: day
-- grain: one row per (gpu_model, day); when a day is re-run only the latest fit (fitted_at) is kept
-- Written by models.power.fit_day (delete-then-insert for the day).
-- columns:
--   gpu_model [text] NVML name
--   day [DATE] UTC day fitted
--   fitted_at [TIMESTAMPTZ, UTC] when the fit ran
--   feature_set [text] 'dcgm' | 'nvml'
--   n_samples [count] training rows used
--   n_holdout [count] held-out rows scored
--   n_power_limited_excluded [count] rows at the power cap left out of the fit
--   n_incomplete_excluded [count] rows missing a feature, left out
--   mape_pct [%] mean absolute percentage error of power on held-out rows
--   r2 [ratio] coefficient of determination on held-out rows
--   rmse_w [W] root mean square error on held-out rows
--   job_energy_error_pct [%] error of energy over held-out jobs (NULL without a jobs relation)
--   static_w [W] static power at 25 C and zero activity
--   temp_w_per_c [W/C] rise of static power per degree
--   static_pct_per_10c [%] rise of static power per 10 C, as a share of static_w
--   dyn_w [W] dynamic power at full activity and f_max
--   dyn_freq_exponent [unitless] alpha of (f/f_max) in the dynamic term (NULL without clocks or sweep)
--   mem_w [W] memory power at full DRAM/memory activity
--   pcie_w_per_gbps [W per GB/s] PCIe power per GB/s of traffic
--   f_max_mhz [MHz] the model's highest SM clock
--   activity_exponent [unitless] gamma of activity in the dynamic term; 1 where clocks are read
--   activity_hold_s [s] time constant of the dynamic power's decay after work stops; 0 = none
--   dyn_freq_exponent_source [text] where alpha came from: 'fleet' (the model's readings, its clock
--     varying), 'sweep:<files>' (measured clock sweeps, [models].clock_sweep_files), NULL (none)
--   passed_gate [bool] held-out MAPE within the bound and enough rows
--   gate_reason [text] why the gate failed (NULL if passed)
--   drift_pct [%] largest change of static/dyn/mem power vs the previous fit (NULL if none)
--   drift_warning [bool] drift_pct above the settings' threshold
CREATE TABLE IF NOT EXISTS fct_power_model (
    gpu_model VARCHAR NOT NULL,
    day DATE NOT NULL,
    fitted_at TIMESTAMPTZ NOT NULL,
    feature_set VARCHAR NOT NULL,
    n_samples BIGINT,
    n_holdout BIGINT,
    n_power_limited_excluded BIGINT,
    n_incomplete_excluded BIGINT,
    mape_pct DOUBLE,
    r2 DOUBLE,
    rmse_w DOUBLE,
    job_energy_error_pct DOUBLE,
    static_w DOUBLE,
    temp_w_per_c DOUBLE,
    static_pct_per_10c DOUBLE,
    dyn_w DOUBLE,
    dyn_freq_exponent DOUBLE,
    mem_w DOUBLE,
    pcie_w_per_gbps DOUBLE,
    f_max_mhz DOUBLE,
    activity_exponent DOUBLE,
    activity_hold_s DOUBLE,
    dyn_freq_exponent_source VARCHAR,
    passed_gate BOOLEAN NOT NULL,
    gate_reason VARCHAR,
    drift_pct DOUBLE,
    drift_warning BOOLEAN
)
