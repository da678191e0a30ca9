-- fit_feature_choice: which features a power fit over some rows uses, from how many of those rows
-- carry each reading. The one rule for the window's choice (power_feature_choice.sql over its samples,
-- power_window_choice.sql over the stored sums) and each day's (fct_power_fit_sums_hourly.sql): a
-- day's stored sums stand in for its samples only where the day chose as its window did, so the
-- two choices must be one rule. A reading counts where at least half the rows carry it; SM activity
-- on half of them makes the set 'dcgm' (DCGM's SM and DRAM activity, read by activity_of_kind.sql
-- in kind 'sm_active'), else 'nvml' (NVML's utilisations, kind 'util_gpu'); models.recommend_inputs
-- .ACTIVITY_KIND_OF_FEATURE_SET is this pairing for Python (tests/models/test_power_fit_feature_choice.py
-- holds the two equal). A scalar macro (models.power_features.input_view creates it; for Spark,
-- warehouse/spark_dialect.py inlines it at each call).
-- Arguments: n_rows [count] the rows chosen over; n_sm_active, n_dram_active, n_util_gpu,
--   n_util_mem, n_temp, n_clock (SM clock), n_pcie (both directions) [count] of them with that
--   reading; f_min_mhz, f_max_mhz [MHz] their lowest and highest SM clock.
-- Returns a STRUCT: feature_set ('dcgm' | 'nvml'), activity_kind ('sm_active' | 'util_gpu'),
--   has_activity (no activity reading at all: a static-only fit instead of none), has_temp,
--   has_clock, has_memory, has_pcie, clock_varies (the clock ratio varies: alpha is identifiable).
CREATE OR REPLACE TEMP MACRO fit_feature_choice(n_rows, n_sm_active, n_dram_active, n_util_gpu, n_util_mem,
                                                n_temp, n_clock, n_pcie, f_min_mhz, f_max_mhz) AS (
    struct_pack(
        feature_set := CASE WHEN n_sm_active / n_rows >= 0.5 THEN 'dcgm' ELSE 'nvml' END,
        activity_kind := CASE WHEN n_sm_active / n_rows >= 0.5 THEN 'sm_active' ELSE 'util_gpu' END,
        has_activity := n_sm_active / n_rows >= 0.5 OR n_util_gpu / n_rows >= 0.5,
        has_temp := n_temp / n_rows >= 0.5,
        has_clock := n_clock / n_rows >= 0.5 AND f_max_mhz > 0,
        has_memory := CASE WHEN n_sm_active / n_rows >= 0.5 THEN n_dram_active / n_rows
                           ELSE n_util_mem / n_rows END >= 0.5,
        has_pcie := n_pcie / n_rows >= 0.5,
        clock_varies := n_clock / n_rows >= 0.5 AND f_max_mhz > 0 AND f_min_mhz < f_max_mhz)
)
