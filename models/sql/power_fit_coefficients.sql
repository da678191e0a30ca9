-- power_fit_coefficients: the coefficients just fitted, one row per GPU model, that the held-out
-- validation and the residual SQL join on. A temporary table models.power_store creates empty and
-- fills (the units of fct_power_model's columns of the same names).
CREATE OR REPLACE TEMP TABLE power_fit_coefficients (
    gpu_model VARCHAR, static_w DOUBLE, temp_w_per_c DOUBLE, dyn_w DOUBLE, dyn_freq_exponent DOUBLE,
    mem_w DOUBLE, pcie_w_per_gbps DOUBLE, activity_exponent DOUBLE, activity_hold_s DOUBLE
)
