-- int_gpu_samples_checked (Spark SQL): warehouse/sql/int_gpu_samples_checked.sql for a range of
-- days, on Apache Spark. Same rules, same order, same result per row; see that file for each rule.
-- grain: one row per raw GPU reading in [first_day - margin, last_day + 1 + margin]
-- input: temp view raw_gpu_samples (the lake's gpu_samples, Hive `date` partition typed DATE)
-- parameters: :first_day, :last_day DATE; :first_us, :end_us BIGINT (UTC microseconds of
--   first_day 00:00 and last_day + 1 00:00); :margin_us, :now_us, :max_clock_skew_us BIGINT;
--   :max_power_over_limit_ratio, :max_power_abs_w, :min_temp_c, :max_temp_c DOUBLE
-- columns: the lake's gpu_samples columns, plus
--   day [DATE] the date= partition the row was read from (UTC day of sampled_at)
--   t_us [BIGINT, us since epoch UTC] sampled_at as an integer
--   reason [text] first quarantine rule broken (NULL: clean)
-- Differs from the DuckDB file in one way: no in_inventory flag (the energy and the power model
-- do not use it; the inventory join stays on the DuckDB side).
-- Dialect notes: DuckDB's float arithmetic (FLOAT x literal stays FLOAT) is reproduced with
-- explicit FLOAT casts; isfinite() is spelled out; no SELECT * EXCLUDE.
WITH window_rows AS (
    SELECT r.*, r.date AS day, unix_micros(r.sampled_at) AS t_us
    FROM raw_gpu_samples AS r
    WHERE r.date BETWEEN date_sub(:first_day, 1) AND date_add(:last_day, 1)
      AND (
          r.date BETWEEN :first_day AND :last_day
          OR unix_micros(r.sampled_at) BETWEEN :first_us - :margin_us AND :end_us + :margin_us
      )
),
numbered AS (
    SELECT
        *,
        row_number() OVER (
            PARTITION BY gpu_uuid, sampled_at, source
            ORDER BY power_w NULLS LAST, energy_mj_total NULLS LAST, host, gpu_index
        ) AS duplicate_rank,
        CASE WHEN power_w IS NULL THEN true
             ELSE NOT (isnan(power_w) OR power_w = CAST('Infinity' AS FLOAT) OR power_w = CAST('-Infinity' AS FLOAT))
        END AS power_finite
    FROM window_rows
),
checked AS (
    SELECT
        sampled_at, host, gpu_index, gpu_uuid, gpu_model, power_w, energy_mj_total, temp_c, mem_temp_c,
        sm_clock_mhz, mem_clock_mhz, util_gpu_pct, util_mem_pct, sm_active_ratio, sm_occupancy_ratio,
        tensor_active_ratio, dram_active_ratio, pcie_tx_bytes_per_s, pcie_rx_bytes_per_s, power_limit_w,
        mem_used_mib, pstate, clock_event_reasons, source, day, t_us,
        CASE
            WHEN duplicate_rank > 1 THEN 'duplicate_key'
            WHEN t_us > :now_us + :max_clock_skew_us THEN 'future_timestamp'
            WHEN NOT power_finite THEN 'power_not_finite'
            WHEN power_w < 0 THEN 'power_negative'
            WHEN energy_mj_total < 0 THEN 'counter_negative'
            WHEN power_limit_w > 0 AND power_w > CAST(100 * power_limit_w AS FLOAT) THEN 'power_unit_mw'
            WHEN coalesce(power_limit_w, 0) <= 0 AND power_w > 10 * :max_power_abs_w THEN 'power_unit_mw'
            WHEN power_limit_w > 0 AND power_w > :max_power_over_limit_ratio * power_limit_w THEN 'power_over_limit'
            WHEN coalesce(power_limit_w, 0) <= 0 AND power_w > :max_power_abs_w THEN 'power_over_bound'
            WHEN NOT coalesce(temp_c BETWEEN :min_temp_c AND :max_temp_c, true)
              OR NOT coalesce(mem_temp_c BETWEEN :min_temp_c AND :max_temp_c, true) THEN 'temp_out_of_range'
            WHEN NOT coalesce(sm_active_ratio BETWEEN 0 AND 1, true)
              OR NOT coalesce(sm_occupancy_ratio BETWEEN 0 AND 1, true)
              OR NOT coalesce(tensor_active_ratio BETWEEN 0 AND 1, true)
              OR NOT coalesce(dram_active_ratio BETWEEN 0 AND 1, true) THEN 'ratio_out_of_range'
            WHEN NOT coalesce(util_gpu_pct BETWEEN 0 AND 100, true)
              OR NOT coalesce(util_mem_pct BETWEEN 0 AND 100, true) THEN 'util_out_of_range'
        END AS reason
    FROM numbered
)
SELECT * FROM checked
