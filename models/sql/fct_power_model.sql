-- fct_power_model: one row per GPU model per fitted day (delete-then-insert for the day).
-- Grain: gpu_model x day (x fitted_at when a day is re-run, only the latest run is kept).
-- Columns and units:
--   gpu_model, day (DATE fitted), fitted_at (TIMESTAMPTZ, UTC), feature_set ('dcgm' | 'nvml')
--   n_samples (training rows used), n_holdout (held-out rows scored), n_power_limited_excluded
--   (rows at the power cap left out of the fit), n_incomplete_excluded (rows missing a feature)
--   mape_pct (%, held-out), r2 (held-out), rmse_w (W, held-out), job_energy_error_pct (%, held-out
--   jobs; NULL without a jobs relation)
--   static_w (W at 25 C and zero activity), temp_w_per_c (W/C), static_pct_per_10c (% of static per 10 C)
--   dyn_w (W at full activity and f_max), dyn_freq_exponent (alpha of (f/f_max); NULL without clocks)
--   mem_w (W at full DRAM/memory activity), pcie_w_per_gbps (W per GB/s), f_max_mhz (MHz)
--   activity_exponent (gamma of activity in the dynamic term; 1 where clocks are read)
--   activity_hold_s (s, time constant of the dynamic power's decay after work stops; 0 = none)
--   passed_gate (held-out MAPE within the bound and enough rows), gate_reason (why not; NULL if passed)
--   drift_pct (%, largest change of static/dyn/mem power vs the previous fit; NULL if none)
--   drift_warning (drift_pct above the settings' threshold)
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
    passed_gate BOOLEAN NOT NULL,
    gate_reason VARCHAR,
    drift_pct DOUBLE,
    drift_warning BOOLEAN
)
