-- dashboard_realised_savings: what the applied settings saved, measured, beside the prediction, every day held.
-- Input: fct_recommendation_outcome (pooled rows per GPU model and setting), a stand-in when absent.
-- Columns: day [DATE], label [text] GPU model and limit change, realised_saving_pct [%],
--   saving_ci_low_pct [%], saving_ci_high_pct [%], predicted_saving_pct [%], n_treated_gpus [count].
SELECT day,
       gpu_model || ': ' || CAST(round(power_limit_w_before) AS INTEGER) || '→' || CAST(round(power_limit_w_after) AS INTEGER)
           || ' W' AS label,
       realised_saving_pct, saving_ci_low_pct, saving_ci_high_pct, predicted_saving_pct, n_treated_gpus
FROM fct_recommendation_outcome
WHERE scope = 'model_setting'
ORDER BY day, label
