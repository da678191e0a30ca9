-- fct_recommendation_outcome: what a power setting that took effect really saved (delete-then-insert per day).
-- Grain: day (the day measured up to) x scope x gpu_uuid (NULL for the pooled rows) x effective_day.
-- Method (models/outcome.py): difference in differences of log(energy per unit of work), the
--   treated GPU after vs before its change, against GPUs of the same model whose limit did not
--   change over the same days; 95% t-interval.
-- Columns:
--   day [DATE] last day included; scope ['gpu' one treated GPU | 'model_setting' all GPUs of the model given the same change]
--   host, gpu_uuid [text] (NULL for model_setting rows); gpu_model [text]
--   effective_day [DATE] first whole day under the new limit; evidence ['agent_audit+samples' | 'samples']
--   method ['matched_jobs': each GPU's energy per unit relative to control GPUs in the same jobs |
--     'gpu_day': whole GPU-days, when too few jobs span treated and control GPUs]
--   power_limit_w_before, power_limit_w_after [W]
--   outcome_unit ['flop' | 'sample' | 'request' | 'active_hour']: the unit of work energy is divided by
--   n_treated_gpus, n_control_gpus [count]; n_days_before, n_days_after [count] per treated GPU (max)
--   energy_j_per_unit_before, energy_j_per_unit_after [J per outcome_unit] treated GPUs, ratio of sums
--   realised_saving_pct [%] of energy per unit of work, net of the controls' change; saving_ci_low_pct,
--   saving_ci_high_pct [%] its 95% interval (NULL with fewer than 2 control GPUs)
--   predicted_saving_pct, predicted_slowdown_pct [%] fct_recommendation's expected figures for this limit (NULL: none)
--   realised_slowdown_pct [%] loss of work per active hour, net of the controls (NULL for active_hour)
--   note [text] what limits the estimate
CREATE TABLE IF NOT EXISTS fct_recommendation_outcome (
    day DATE NOT NULL,
    scope VARCHAR NOT NULL,
    host VARCHAR,
    gpu_uuid VARCHAR,
    gpu_model VARCHAR NOT NULL,
    effective_day DATE NOT NULL,
    evidence VARCHAR,
    method VARCHAR,
    power_limit_w_before DOUBLE,
    power_limit_w_after DOUBLE,
    outcome_unit VARCHAR,
    n_treated_gpus INTEGER,
    n_control_gpus INTEGER,
    n_days_before INTEGER,
    n_days_after INTEGER,
    energy_j_per_unit_before DOUBLE,
    energy_j_per_unit_after DOUBLE,
    realised_saving_pct DOUBLE,
    saving_ci_low_pct DOUBLE,
    saving_ci_high_pct DOUBLE,
    predicted_saving_pct DOUBLE,
    realised_slowdown_pct DOUBLE,
    predicted_slowdown_pct DOUBLE,
    note VARCHAR
)
