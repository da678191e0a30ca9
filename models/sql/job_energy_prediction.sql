-- job_energy_prediction: each chosen job's measured energy on the GPU model it ran on, and the energy
-- every target GPU model's fitted power model predicts for the same activity profile.
-- Grain: job_id x to_gpu_model (a job on several GPUs is summed over them).
-- Inputs: job_energy_input_jobs (temp view over the jobs relation), gpu_activity_samples (one
--   activity stream per GPU: its readings are paired in time order without another stream's),
--   job_energy_targets (temp table, one row per target model: coefficients of fct_power_model and
--   power_limit_w, the target's limit in W).
-- Parameters: $day DATE, $job_ids VARCHAR[], $max_interval_s DOUBLE (s one sample may stand for),
--   $time_scale DOUBLE (target run time / source run time; 1 = the same profile for the same time).
-- Per sample of the job: activity and memory (the stream's activity_ratio and memory_ratio), PCIe GB/s, clock ratio (sm_clock / highest SM clock the source model
--   showed that day; 1 where not read) and chip temperature are taken as the job's profile; the
--   target's power is min(model power at the same activity, clock ratio and temperature, its limit).
--   A sample without a reading of a term the target's model uses (its temperature, or PCIe in both
--   directions) has no profile either: taken as 25 C or 0 GB/s, it had predicted the term away.
--   Steady state: the decay after work stops (activity_hold_s) is not applied. A sample whose
--   activity or DRAM activity was not read is no profile (its power on the target is unknown, not
--   idle): the samples that have one stand for the run's whole time, and a run with none predicts
--   NULL. Read as 0, a job whose DCGM activity was missing every other minute predicted 40% low on
--   its own model.
-- Columns: job_id, from_gpu_model, to_gpu_model, n_gpus, duration_s (s, source run),
--   source_energy_kwh (kWh, measured: power x interval), predicted_energy_kwh (kWh on the target,
--   predicted power x interval over the profiled samples, scaled to the whole run, x $time_scale;
--   NULL when no sample has a profile), mean_activity_ratio and mean_memory_ratio (0..1, the
--   source run's over its profiled samples, time-weighted: its bottleneck), profiled_ratio (0..1,
--   the share of the run's time with a profile).
WITH chosen AS (
    SELECT job_id, gpu_uuid, started_at, ended_at
    FROM job_energy_input_jobs
    WHERE job_id IN (SELECT unnest(CAST($job_ids AS VARCHAR[])))
),
day_samples AS (
    SELECT
        s.*,
        least(coalesce(epoch(lead(s.sampled_at) OVER (PARTITION BY s.gpu_uuid ORDER BY s.sampled_at))
                       - epoch(s.sampled_at), 0.0), $max_interval_s) AS interval_s,
        max(s.sm_clock_mhz) OVER (PARTITION BY s.gpu_model) AS f_max_mhz
    FROM gpu_activity_samples AS s
    WHERE s.day = $day AND s.gpu_uuid IN (SELECT gpu_uuid FROM chosen) AND s.power_w IS NOT NULL
),
job_samples AS (
    SELECT
        c.job_id, s.gpu_uuid, s.gpu_model, s.interval_s,
        CAST(s.power_w AS DOUBLE) AS power_w,
        s.activity_ratio,
        s.memory_ratio,
        (s.pcie_tx_bytes_per_s + s.pcie_rx_bytes_per_s) / 1e9 AS pcie_gbps,  -- NULL unless both directions read
        coalesce(s.sm_clock_mhz / nullif(s.f_max_mhz, 0), 1.0) AS clock_ratio,
        CAST(s.temp_c AS DOUBLE) - 25.0 AS temp_delta_c
    FROM day_samples AS s
    JOIN chosen AS c ON s.gpu_uuid = c.gpu_uuid AND s.sampled_at >= c.started_at AND s.sampled_at < c.ended_at
),
predicted AS (
    SELECT
        j.job_id, j.gpu_uuid, j.gpu_model AS from_gpu_model, t.gpu_model AS to_gpu_model, j.interval_s, j.power_w,
        j.activity_ratio, j.memory_ratio,
        CASE WHEN j.activity_ratio IS NOT NULL AND j.memory_ratio IS NOT NULL
                  AND (j.temp_delta_c IS NOT NULL OR coalesce(t.temp_w_per_c, 0.0) = 0.0)
                  AND (j.pcie_gbps IS NOT NULL OR coalesce(t.pcie_w_per_gbps, 0.0) = 0.0)
             THEN j.interval_s END AS profiled_s,
        least(
            t.static_w
                + CASE WHEN coalesce(t.temp_w_per_c, 0.0) = 0.0 THEN 0.0 ELSE t.temp_w_per_c * j.temp_delta_c END
                + t.dyn_w * pow(j.activity_ratio, coalesce(t.activity_exponent, 1.0))
                    * pow(j.clock_ratio, coalesce(t.dyn_freq_exponent, 1.0))
                + t.mem_w * j.memory_ratio
                + CASE WHEN coalesce(t.pcie_w_per_gbps, 0.0) = 0.0 THEN 0.0 ELSE t.pcie_w_per_gbps * j.pcie_gbps END,
            coalesce(t.power_limit_w, 1e9)
        ) AS predicted_power_w
    FROM job_samples AS j
    CROSS JOIN job_energy_targets AS t
)
SELECT
    job_id, from_gpu_model, to_gpu_model,
    count(DISTINCT gpu_uuid) AS n_gpus,
    sum(interval_s) / count(DISTINCT gpu_uuid) AS duration_s,
    sum(power_w * interval_s) / 3.6e6 AS source_energy_kwh,
    sum(predicted_power_w * profiled_s) * sum(interval_s) / nullif(sum(profiled_s), 0)
        * $time_scale / 3.6e6 AS predicted_energy_kwh,
    sum(activity_ratio * profiled_s) / nullif(sum(profiled_s), 0) AS mean_activity_ratio,
    sum(memory_ratio * profiled_s) / nullif(sum(profiled_s), 0) AS mean_memory_ratio,
    coalesce(sum(profiled_s), 0) / nullif(sum(interval_s), 0) AS profiled_ratio
FROM predicted
GROUP BY job_id, from_gpu_model, to_gpu_model
ORDER BY job_id, to_gpu_model
