-- power_features (Spark SQL): models/sql/power_features.sql on Apache Spark, limited to the
-- columns the sufficient statistics use (no interval_s, temp_c, power_limit_w, f_max_mhz).
-- grain: gpu_uuid x sampled_at, clean readings of days in (:day - :history_days, :day]
-- input: temp view stg_gpu_samples covering those days (warehouse/sql/stg_gpu_samples.sql as Spark
--   runs it, day by day), read one stream per GPU and day as models/sql/gpu_activity_streams.sql chooses it
-- parameters: :day DATE, :history_days INT, :holdout_fraction DOUBLE (0..1), :holdout_max_days DOUBLE
-- columns: gpu_model, feature_set ('dcgm' | 'nvml'), gpu_uuid, t_us [us since epoch UTC],
--   power_w [W], temp_delta_c [C above 25 C], activity_ratio, clock_ratio, memory_ratio [0..1],
--   pcie_gbps [GB/s], is_power_limited, is_holdout, is_complete [bool],
--   prior_busy_activity_ratio [0..1], since_busy_s [s] (see the DuckDB file for each)
-- Dialect notes: DuckDB keeps FLOAT x literal as FLOAT (temp_c - 25.0, util/100.0, 0.99 x limit):
-- reproduced with FLOAT casts so both engines see the same values; last_value(x, true) is
-- DuckDB's last_value(x IGNORE NULLS).
WITH clean_rows AS (
    SELECT *, unix_micros(sampled_at) AS t_us
    FROM stg_gpu_samples
    WHERE day <= :day
      AND day > date_sub(:day, :history_days)
),
streams AS (
    -- models/sql/gpu_activity_streams.sql: one stream of readings per GPU and day
    SELECT day, gpu_uuid, source,
           count(*) AS n,
           count(power_w) AS n_power,
           sum(CASE WHEN power_w IS NOT NULL AND sm_active_ratio IS NOT NULL THEN 1 ELSE 0 END) AS n_power_sm_active,
           sum(CASE WHEN power_w IS NOT NULL AND util_gpu_pct IS NOT NULL THEN 1 ELSE 0 END) AS n_power_util_gpu
    FROM clean_rows
    GROUP BY day, gpu_uuid, source
),
chosen_streams AS (
    SELECT day, gpu_uuid, source
    FROM (
        SELECT *, row_number() OVER (
            PARTITION BY day, gpu_uuid
            ORDER BY CASE WHEN n_power > 0 AND n_power_sm_active >= 0.5 * n_power THEN 1 ELSE 0 END DESC,
                     n_power_sm_active DESC, n_power_util_gpu DESC, n_power DESC, n DESC, source ASC NULLS LAST
        ) AS stream_rank
        FROM streams
    ) AS ranked
    WHERE stream_rank = 1
),
window_rows AS (
    SELECT r.*
    FROM clean_rows AS r
    LEFT SEMI JOIN chosen_streams AS c
        ON c.day = r.day AND c.gpu_uuid = r.gpu_uuid AND c.source <=> r.source
    WHERE r.power_w IS NOT NULL
      AND r.gpu_model IS NOT NULL
),
availability AS (
    SELECT
        gpu_model,
        count(sm_active_ratio) / count(*) AS sm_active_share,
        count(dram_active_ratio) / count(*) AS dram_active_share,
        count(util_gpu_pct) / count(*) AS util_gpu_share,
        count(util_mem_pct) / count(*) AS util_mem_share,
        count(temp_c) / count(*) AS temp_share,
        count(sm_clock_mhz) / count(*) AS clock_share,
        count(pcie_tx_bytes_per_s) / count(*) AS pcie_share,
        max(sm_clock_mhz) AS f_max_mhz,
        min(t_us / 1e6) AS first_epoch_s,
        max(t_us / 1e6) AS last_epoch_s
    FROM window_rows
    GROUP BY gpu_model
),
feature_choice AS (
    SELECT
        gpu_model,
        CASE WHEN sm_active_share >= 0.5 THEN 'dcgm' ELSE 'nvml' END AS feature_set,
        sm_active_share >= 0.5 OR util_gpu_share >= 0.5 AS has_activity,
        temp_share >= 0.5 AS has_temp,
        clock_share >= 0.5 AND f_max_mhz > 0 AS has_clock,
        CASE WHEN sm_active_share >= 0.5 THEN dram_active_share ELSE util_mem_share END >= 0.5 AS has_memory,
        pcie_share >= 0.5 AS has_pcie,
        f_max_mhz,
        greatest(first_epoch_s + (last_epoch_s - first_epoch_s) * (1 - :holdout_fraction),
                 last_epoch_s - :holdout_max_days * 86400) AS holdout_from_epoch_s
    FROM availability
),
features AS (
    SELECT
        w.gpu_model,
        c.feature_set,
        c.has_clock,
        w.gpu_uuid,
        w.t_us,
        CAST(w.power_w AS DOUBLE) AS power_w,
        CASE WHEN c.has_temp THEN CAST(w.temp_c - CAST(25.0 AS FLOAT) AS FLOAT) ELSE CAST(0.0 AS FLOAT) END AS temp_delta_c,
        CASE WHEN NOT c.has_activity THEN 0.0
             WHEN c.feature_set = 'dcgm' THEN CAST(w.sm_active_ratio AS DOUBLE)
             ELSE CAST(CAST(w.util_gpu_pct / CAST(100.0 AS FLOAT) AS FLOAT) AS DOUBLE) END AS activity_ratio,
        CASE WHEN c.has_clock THEN w.sm_clock_mhz / c.f_max_mhz ELSE 1.0 END AS clock_ratio,
        CASE WHEN NOT c.has_memory THEN 0.0
             WHEN c.feature_set = 'dcgm' THEN CAST(w.dram_active_ratio AS DOUBLE)
             ELSE CAST(CAST(w.util_mem_pct / CAST(100.0 AS FLOAT) AS FLOAT) AS DOUBLE) END AS memory_ratio,
        CASE WHEN c.has_pcie THEN (w.pcie_tx_bytes_per_s + coalesce(w.pcie_rx_bytes_per_s, 0)) / 1e9
             ELSE 0.0 END AS pcie_gbps,
        (coalesce(w.clock_event_reasons, 0) & 4) <> 0
            OR (w.power_limit_w IS NOT NULL
                AND w.power_w >= CAST(CAST(0.99 AS FLOAT) * w.power_limit_w AS FLOAT)) AS is_power_limited,
        w.t_us / 1e6 >= c.holdout_from_epoch_s AS is_holdout
    FROM window_rows AS w
    JOIN feature_choice AS c ON c.gpu_model = w.gpu_model
),
with_prior_busy AS (
    SELECT
        f.*,
        last_value(CASE WHEN f.activity_ratio > 0 THEN f.t_us END, true) OVER prior AS prior_busy_us,
        last_value(CASE WHEN f.activity_ratio > 0 THEN f.activity_ratio END, true) OVER prior AS prior_busy_ratio
    FROM features AS f
    WHERE NOT f.has_clock
    WINDOW prior AS (PARTITION BY f.gpu_uuid ORDER BY f.t_us ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
    UNION ALL
    SELECT f.*, CAST(NULL AS BIGINT) AS prior_busy_us, CAST(NULL AS DOUBLE) AS prior_busy_ratio
    FROM features AS f
    WHERE f.has_clock
)
SELECT
    gpu_model, feature_set, gpu_uuid, t_us, power_w, temp_delta_c, activity_ratio, clock_ratio,
    memory_ratio, pcie_gbps, is_power_limited, is_holdout,
    coalesce(prior_busy_ratio, 0.0) AS prior_busy_activity_ratio,
    (t_us - prior_busy_us) / 1e6 AS since_busy_s,
    temp_delta_c IS NOT NULL AND activity_ratio IS NOT NULL AND clock_ratio IS NOT NULL
        AND memory_ratio IS NOT NULL AND pcie_gbps IS NOT NULL AS is_complete
FROM with_prior_busy
