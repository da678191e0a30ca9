-- fct_power_residual_hourly: where the power model is wrong, per GPU-hour of one day.
-- kind: day
-- grain: one row per (gpu_uuid, hour_at) of the fitted day (rows of power_features with day = $day)
-- Inputs: power_predictions (the fit of that day, models/sql/power_predictions.sql). Written by models.power.fit_day.
-- columns:
--   day [DATE] UTC day
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   host [text] server the GPU sits in
--   gpu_uuid [text] GPU
--   gpu_model [text] NVML name
--   feature_set [text] 'dcgm' | 'nvml'
--   n_samples [count] readings in the hour
--   measured_energy_kwh [kWh] sum of power x interval (one source: the one with most readings)
--   predicted_energy_kwh [kWh] the model from that hour's readings, capped at the power limit
--   residual_energy_kwh [kWh] measured - predicted
--   residual_pct [%] residual as a share of measured
--   avg_temp_c [C] mean chip temperature
--   power_limited_ratio [0..1] share of readings at the power cap
WITH predicted AS (
    SELECT * FROM power_predictions WHERE day = $day
),
per_source AS (
    SELECT
        $day::DATE AS day,
        -- the hour from epoch arithmetic: date_trunc on a TIMESTAMPTZ goes through the time zone
        to_timestamp(epoch_us(sampled_at) // 3600000000 * 3600) AS hour_at,
        host, gpu_uuid, source,
        -- one model (and so one feature set) per GPU: carried, not grouped on
        any_value(gpu_model) AS gpu_model, any_value(feature_set) AS feature_set,
        count(*) AS n_samples,
        sum(power_w * interval_s) / 3.6e6 AS measured_energy_kwh,
        sum(predicted_power_w * interval_s) / 3.6e6 AS predicted_energy_kwh,
        avg(temp_c) AS avg_temp_c,
        avg(CASE WHEN is_power_limited THEN 1.0 ELSE 0.0 END) AS power_limited_ratio
    FROM predicted
    GROUP BY epoch_us(sampled_at) // 3600000000, host, gpu_uuid, source
),
hourly AS (
    -- one source per GPU-hour (the one with most readings): a GPU seen by NVML and DCGM has each
    -- interval twice, once per source, and summing both would double its energy
    SELECT * EXCLUDE (source, source_rank)
    FROM (SELECT *, row_number() OVER (PARTITION BY gpu_uuid, hour_at ORDER BY n_samples DESC, source) AS source_rank
          FROM per_source)
    WHERE source_rank = 1
)
SELECT
    day, hour_at, host, gpu_uuid, gpu_model, feature_set, n_samples,
    measured_energy_kwh, predicted_energy_kwh,
    measured_energy_kwh - predicted_energy_kwh AS residual_energy_kwh,
    CASE WHEN measured_energy_kwh > 0
         THEN 100.0 * (measured_energy_kwh - predicted_energy_kwh) / measured_energy_kwh END AS residual_pct,
    avg_temp_c, power_limited_ratio
FROM hourly
