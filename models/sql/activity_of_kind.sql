-- activity_of_kind: one reading's activity (or memory activity) as a ratio 0..1 in the measure
-- `kind` names: DCGM's ratio for 'sm_active' (SM or DRAM activity), NVML's percentage / 100 for
-- 'util_gpu' and any other kind (utilisation or memory utilisation). The one rule every file that
-- reads activity per sample applies (gpu_activity_samples, power_interval_profiles,
-- recommend_gpu_profile, and the power fit's power_feature_rows and fct_power_fit_sums_hourly, whose
-- feature set 'dcgm' reads kind 'sm_active' and 'nvml' 'util_gpu'), so the fit and the models that
-- score with it cannot read two measures. A scalar macro, not a relation
-- (models.activity.create_activity_macros creates it per connection; for Spark,
-- warehouse/spark_dialect.py inlines it at each call).
-- Arguments: kind ('sm_active' | 'util_gpu'), dcgm_ratio (0..1: sm_active_ratio or
--   dram_active_ratio), nvml_pct (0..100: util_gpu_pct or util_mem_pct). NULL where that measure
--   was not read.
CREATE OR REPLACE TEMP MACRO activity_of_kind(kind, dcgm_ratio, nvml_pct) AS (
    CASE WHEN kind = 'sm_active' THEN CAST(dcgm_ratio AS DOUBLE) ELSE nvml_pct / 100.0 END
)
