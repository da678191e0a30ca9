-- fct_power_fit_sums_hourly: each day's share of the power fit's sufficient statistics, computed once
-- per day so a fit over a window of days sums this small table instead of re-reading its rows.
-- kind: day
-- grain: one row per (source_relation, day, hour_at, gpu_model, sm_clock_mhz) of the clean GPU samples
-- (rows with power_w and gpu_model). The feature set, its activity measure and which features count
-- are chosen per (day, gpu_model) by the macro fit_feature_choice.sql, the rule of the window's choice
-- (power_feature_choice.sql, power_window_choice.sql), and activity and memory read in that measure
-- by the macro activity_of_kind.sql (the rule of every file that reads activity; models.activity
-- .create_activity_macros creates it); a fit uses a day's rows only where that choice equals its
-- window's (else it re-reads that day's samples). Sums cover rows not power limited and with every
-- feature but the clock present (the clock is the group key, so the fit scales them by
-- (sm_clock_mhz / f_max_mhz)^alpha for any window's f_max and any alpha).
-- Written by models.power.fit_day (delete-then-insert per day). Parameters: $days DATE[], $source VARCHAR,
-- $rules VARCHAR (the SHA-256 of this file's text and of the macros it calls, fit_feature_choice.sql and
-- activity_of_kind.sql: models.power_features.sums_rules; sums stored under other rules are summed again);
-- power_sums_build_ids (temp view: day, build_id) names the warehouse build of each day's rows.
-- columns:
--   source_relation [text] the samples relation the statistics were computed from
--   samples_build_id [UUID] fct_warehouse_build_daily.build_id of the rows summed: a day rebuilt since
--     is summed again, even with as many rows (NULL: a relation the warehouse build does not record)
--   rules_sha256 [text] SHA-256 of the SQL that computed the row: a day summed under other rules (an
--     older release's) is summed again while its samples are kept (NULL: stored before this column)
--   day [DATE] UTC day
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   gpu_model [text] NVML name
--   sm_clock_mhz [MHz] SM clock of the rows summed (NULL: rows without a clock reading)
--   feature_set [text] 'dcgm' | 'nvml', chosen for the day
--   has_activity [bool] the day's rows carry an activity reading (else activity counts as 0)
--   has_temp [bool] the day's rows carry temperature (else temp_delta counts as 0)
--   has_memory [bool] the day's rows carry memory activity (else 0)
--   has_pcie [bool] the day's rows carry PCIe throughput (else 0)
--   n_rows [count] samples in the group
--   n_sm_active [count] of them with sm_active_ratio
--   n_dram_active [count] of them with dram_active_ratio
--   n_util_gpu [count] of them with util_gpu_pct
--   n_util_mem [count] of them with util_mem_pct
--   n_temp [count] of them with temp_c
--   n_pcie [count] of them with both PCIe directions (tx and rx: one without the other is no reading)
--   first_sampled_at [TIMESTAMPTZ, UTC] earliest sample in the group
--   last_sampled_at [TIMESTAMPTZ, UTC] latest sample in the group
--   n_power_limited [count] samples at the power cap (left out of the fit)
--   n_incomplete [count] samples not at the cap missing a feature other than the clock
--   n [count] samples summed below
--   s1 [C] sum of temp_delta_c (temperature - 25 C)
--   sa [ratio] sum of activity_ratio
--   s3 [ratio] sum of memory_ratio
--   s4 [GB/s] sum of pcie_gbps
--   s11 [C^2] sum of temp_delta_c^2
--   s1a [C] sum of temp_delta_c x activity
--   s13 [C] sum of temp_delta_c x memory
--   s14 [C GB/s] sum of temp_delta_c x pcie
--   saa [ratio] sum of activity^2
--   sa3 [ratio] sum of activity x memory
--   sa4 [GB/s] sum of activity x pcie
--   s33 [ratio] sum of memory^2
--   s34 [GB/s] sum of memory x pcie
--   s44 [GB^2/s^2] sum of pcie^2
--   sy [W] sum of power_w
--   s1y [C W] sum of temp_delta_c x power_w
--   say [W] sum of activity x power_w
--   s3y [W] sum of memory x power_w
--   s4y [W GB/s] sum of pcie x power_w
--   syy [W^2] sum of power_w^2
WITH day_rows AS NOT MATERIALIZED (
    SELECT *
    FROM power_input_samples
    WHERE day BETWEEN list_min(CAST($days AS DATE[])) AND list_max(CAST($days AS DATE[]))
      AND list_contains(CAST($days AS DATE[]), day)
      AND power_w IS NOT NULL
      AND gpu_model IS NOT NULL
),
day_choice AS (
    -- the window's rule (power_feature_choice.sql's), over one day: power_window_choice.sql compares the two
    SELECT
        day,
        gpu_model,
        fit_feature_choice(count(*), count(sm_active_ratio), count(dram_active_ratio), count(util_gpu_pct),
                           count(util_mem_pct), count(temp_c), count(sm_clock_mhz),
                           count(pcie_tx_bytes_per_s + pcie_rx_bytes_per_s), min(sm_clock_mhz), max(sm_clock_mhz))
            AS chosen
    FROM day_rows
    GROUP BY day, gpu_model
),
features AS (
    SELECT
        w.day, w.gpu_model, w.sm_clock_mhz, c.feature_set, c.has_activity, c.has_temp, c.has_memory, c.has_pcie,
        to_timestamp(floor(epoch(w.sampled_at) / 3600) * 3600) AS hour_at,
        w.sampled_at, w.sm_active_ratio, w.dram_active_ratio, w.util_gpu_pct, w.util_mem_pct, w.temp_c,
        w.pcie_tx_bytes_per_s + w.pcie_rx_bytes_per_s AS pcie_bytes_per_s,
        CAST(w.power_w AS DOUBLE) AS y,
        CASE WHEN c.has_temp THEN w.temp_c - 25.0 ELSE 0.0 END AS x1,
        CASE WHEN c.has_activity THEN activity_of_kind(c.activity_kind, w.sm_active_ratio, w.util_gpu_pct)
             ELSE 0.0 END AS xa,
        CASE WHEN c.has_memory THEN activity_of_kind(c.activity_kind, w.dram_active_ratio, w.util_mem_pct)
             ELSE 0.0 END AS x3,
        CASE WHEN c.has_pcie THEN (w.pcie_tx_bytes_per_s + w.pcie_rx_bytes_per_s) / 1e9
             ELSE 0.0 END AS x4,
        (coalesce(w.clock_event_reasons, 0) & 4) <> 0
            OR (w.power_limit_w IS NOT NULL AND w.power_w >= 0.99 * w.power_limit_w) AS is_power_limited
    FROM day_rows AS w
    JOIN (SELECT day, gpu_model, chosen.* FROM day_choice) AS c USING (day, gpu_model)
),
usable AS (
    -- features of rows the fit may use, NULL elsewhere (sums skip NULLs)
    SELECT
        *,
        -- the sum is NULL, NaN or infinite where any term is: a NaN had wrecked the whole fit
        NOT is_power_limited AND coalesce(isfinite(x1 + xa + x3 + x4 + y), false) AS is_usable
    FROM features
),
masked AS (
    SELECT
        day, hour_at, gpu_model, sm_clock_mhz, feature_set, has_activity, has_temp, has_memory, has_pcie,
        sampled_at, sm_active_ratio, dram_active_ratio, util_gpu_pct, util_mem_pct, temp_c, pcie_bytes_per_s,
        is_power_limited, is_usable,
        CASE WHEN is_usable THEN x1 END AS x1, CASE WHEN is_usable THEN xa END AS xa,
        CASE WHEN is_usable THEN x3 END AS x3, CASE WHEN is_usable THEN x4 END AS x4,
        CASE WHEN is_usable THEN y END AS y
    FROM usable
)
SELECT
    CAST($source AS VARCHAR) AS source_relation,
    (SELECT any_value(b.build_id) FROM power_sums_build_ids AS b WHERE b.day = masked.day) AS samples_build_id,
    CAST($rules AS VARCHAR) AS rules_sha256,
    day, hour_at, gpu_model, CAST(sm_clock_mhz AS DOUBLE) AS sm_clock_mhz,
    any_value(feature_set) AS feature_set, bool_and(has_activity) AS has_activity, bool_and(has_temp) AS has_temp,
    bool_and(has_memory) AS has_memory, bool_and(has_pcie) AS has_pcie,
    count(*) AS n_rows, count(sm_active_ratio) AS n_sm_active, count(dram_active_ratio) AS n_dram_active,
    count(util_gpu_pct) AS n_util_gpu, count(util_mem_pct) AS n_util_mem, count(temp_c) AS n_temp,
    count(pcie_bytes_per_s) AS n_pcie,
    min(sampled_at) AS first_sampled_at, max(sampled_at) AS last_sampled_at,
    count(*) FILTER (WHERE is_power_limited) AS n_power_limited,
    count(*) FILTER (WHERE NOT is_power_limited AND NOT is_usable) AS n_incomplete,
    count(y) AS n,
    sum(x1) AS s1, sum(xa) AS sa, sum(x3) AS s3, sum(x4) AS s4,
    sum(x1 * x1) AS s11, sum(x1 * xa) AS s1a, sum(x1 * x3) AS s13, sum(x1 * x4) AS s14,
    sum(xa * xa) AS saa, sum(xa * x3) AS sa3, sum(xa * x4) AS sa4, sum(x3 * x3) AS s33, sum(x3 * x4) AS s34,
    sum(x4 * x4) AS s44,
    sum(y) AS sy, sum(x1 * y) AS s1y, sum(xa * y) AS say, sum(x3 * y) AS s3y, sum(x4 * y) AS s4y, sum(y * y) AS syy
FROM masked
GROUP BY day, hour_at, gpu_model, sm_clock_mhz
