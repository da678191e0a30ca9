-- fct_recommendation_outcome: what a power setting that took effect really saved.
-- kind: day
-- grain: one row per (day, scope, gpu_uuid, effective_day) for scope 'gpu', and per (day, scope,
--   gpu_model, power_limit_w_before, power_limit_w_after, effective_day) for the pooled
--   'model_setting' rows (gpu_uuid NULL: one row per model and change); day is the day measured up to
-- Written by models.outcome.measure_outcomes (delete-then-insert per day).
-- Method (models/outcome.py): difference in differences of log(energy per unit of work). In each
--   job that ran on a treated GPU and at least one control (same model, limit unchanged), the
--   treated GPU's log energy per unit minus the controls' mean; the estimate is the mean after the
--   change minus the mean before, with a Welch 95% interval over jobs; pooled rows average the GPUs'
--   own estimates. The GPU-day fallback refuses to report when controls ran different work.
-- columns:
--   day [DATE] last day included
--   scope [text] 'gpu' one treated GPU | 'model_setting' all GPUs of the model given the same change
--   host [text] server (NULL for model_setting rows)
--   gpu_uuid [text] GPU (NULL for model_setting rows)
--   gpu_model [text] NVML name
--   effective_day [DATE] first whole day under the new limit
--   evidence [text] 'agent_audit+samples' | 'samples'
--   method [text] 'matched_jobs': each GPU's energy per unit relative to control GPUs in the same
--     jobs | 'gpu_day': whole GPU-days, when no job spans treated and control GPUs
--   power_limit_w_before [W] limit before the change
--   power_limit_w_after [W] limit after the change
--   outcome_unit [text] 'flop' | 'sample' | 'request' | 'active_hour': the unit of work energy is divided by
--   n_treated_gpus [count] treated GPUs (model_setting rows: those estimated, whose realised and
--     predicted figures the row averages; the note says where the setting had more)
--   n_control_gpus [count] control GPUs that shared jobs with the treated ones
--   n_days_before [count] days before the change, per treated GPU (max)
--   n_days_after [count] days after the change, per treated GPU (max)
--   energy_j_per_unit_before [J per outcome_unit] treated GPU before, ratio of its days' sums (model_setting:
--     the mean of the estimated GPUs' own)
--   energy_j_per_unit_after [J per outcome_unit] likewise after
--   realised_saving_pct [%] of the GPU's energy (the server's overhead not counted) per outcome_unit, net of
--     the controls' change; per 'active_hour' that is its mean busy power
--   saving_ci_low_pct [%] lower end of its 95% interval (NULL with fewer than 2 matched jobs on a side)
--   saving_ci_high_pct [%] upper end of its 95% interval (NULL with fewer than 2 matched jobs on a side)
--   predicted_saving_pct [%] fct_recommendation's expected saving for this limit (what was promised, on the
--     recommendation day's work), against the limit
--     before the change (rebased where that was a cap; NULL: no recommendation gave these limits), on
--     realised_saving_pct's basis: GPU energy per unit of work, or per 'active_hour' the power saving it
--     implies, 1 - (1 - saving) / (1 + predicted slowdown); model_setting: the mean over the estimated GPUs,
--     NULL unless each has one
--   realised_slowdown_pct [%] loss of work per active hour, net of the controls (NULL for active_hour;
--     model_setting: of the estimated GPUs with a pace of their own, NULL where none has one)
--   predicted_slowdown_pct [%] fct_recommendation's expected slowdown for this limit, rebased likewise (NULL: none;
--     model_setting: as predicted_saving_pct)
--   note [text] what limits the estimate
--   predicted_on_mix_saving_pct [%] the setting re-predicted on the work that ran after the change: the
--     recommender's scoring (the fit as of the recommendation, its clock lock if any) of the limit before ->
--     the limit after on each after day's activity profile, the days weighted by their busy hours, on
--     predicted_saving_pct's basis (models.outcome_reprediction); where it and not predicted_saving_pct
--     matches the realised saving, the work changed, not the model (NULL: no fit, or a day's work not
--     scorable, which a measured GPU's note says; model_setting: the mean over the estimated GPUs, NULL
--     unless each has one)
--   predicted_on_mix_slowdown_pct [%] the slowdown likewise re-predicted (model_setting: as above)
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
    note VARCHAR,
    predicted_on_mix_saving_pct DOUBLE,
    predicted_on_mix_slowdown_pct DOUBLE
)
