-- fct_flops_per_watt_daily: sustained FLOPs per watt, FP16-equivalent, per GPU model and for the
-- fleet, per day, against the goal of a 20% gain over the first day the warehouse holds.
-- kind: day
-- grain: one row per (day, gpu_model); gpu_model 'fleet' for the whole fleet
-- Written by models.efficiency_precision.precision_efficiency_day (the day's rows replaced).
-- Inputs: fct_job_efficiency (FLOPs and energy per job and GPU), eff_input_jobs (precision),
-- flops_fp16_factor (temp table: per GPU model and precision, the FP16-equivalent factor, see
-- models/efficiency_precision.py), stg_gpu_samples (chip temperature while the jobs ran).
-- Sustained: the jobs' own FLOPs over their own energy, not the datasheet's peak.
-- columns:
--   day [DATE] UTC day
--   gpu_model [text] NVML name, or 'fleet'
--   n_jobs [count] job-GPU rows with FLOPs
--   flops_total [FLOP] FLOPs the jobs reported, of the part of their runs their energy was measured over
--   fp16_equivalent_flops_total [FLOP] the same converted to FP16-equivalent
--   precision_reported_ratio [0..1] share of those FLOPs whose precision the job stated (the rest counted as FP16)
--   energy_kwh [kWh] the jobs' GPU energy
--   fp16_equivalent_flops_per_w [FLOP/J] sustained FP16-equivalent FLOP/s per W
--   peak_fp16_flops_per_w [FLOP/J] datasheet dense FP16 peak over TDP (NULL for 'fleet' and unknown models)
--   avg_temp_c [C] mean chip temperature of the GPUs while the jobs ran
--   first_day [DATE] first day the relation holds for this GPU model (or the fleet)
--   first_day_flops_per_w [FLOP/J] fp16_equivalent_flops_per_w on first_day
--   gain_vs_first_day_pct [%] change since first_day
--   goal_flops_per_w [FLOP/J] first_day_flops_per_w x (1 + $goal_gain_pct / 100)
WITH jobs AS (
    -- one precision per job and GPU on the day (a requeue at another precision: not reported, once;
    -- a row per precision counted the job's FLOPs and energy twice)
    SELECT job_id, gpu_uuid,
           CASE WHEN count(DISTINCT coalesce("precision", '')) = 1 THEN any_value("precision") END AS "precision"
    FROM eff_input_jobs
    WHERE ended_at > $day::DATE::TIMESTAMPTZ AND started_at < ($day::DATE + 1)::TIMESTAMPTZ
    GROUP BY job_id, gpu_uuid
),
rows AS (
    -- the FLOPs of the part of the run the energy was measured over (as fct_job_efficiency's ratios)
    SELECT e.job_id, e.gpu_uuid, e.gpu_model, e.started_at, e.ended_at, e.flops_total * e.measured_ratio AS flops_total,
           e.energy_kwh, e.flops_total * e.measured_ratio * coalesce(f.fp16_factor, 1.0) AS fp16_flops,
           j."precision" IS NOT NULL AS reported
    FROM (SELECT *, measured_hours / nullif(busy_hours, 0) AS measured_ratio FROM fct_job_efficiency
          WHERE day = $day) AS e
    LEFT JOIN jobs AS j USING (job_id, gpu_uuid)
    LEFT JOIN flops_fp16_factor AS f ON f.gpu_model = e.gpu_model AND f."precision" = j."precision"
    WHERE e.flops_total * e.measured_ratio > 0 AND e.energy_kwh > 0 AND e.gpu_model IS NOT NULL
),
temps AS (
    SELECT r.gpu_model, avg(s.temp_c) AS avg_temp_c
    FROM rows AS r
    JOIN stg_gpu_samples AS s
      ON s.gpu_uuid = r.gpu_uuid AND s.sampled_at >= r.started_at AND s.sampled_at < r.ended_at
    WHERE s.day = $day
    GROUP BY ALL
),
per_model AS (
    SELECT gpu_model, count(*) AS n_jobs, sum(flops_total) AS flops_total, sum(fp16_flops) AS fp16_flops,
           sum(CASE WHEN reported THEN fp16_flops ELSE 0 END) AS reported_flops, sum(energy_kwh) AS energy_kwh
    FROM rows GROUP BY ALL
    UNION ALL
    SELECT 'fleet', count(*), sum(flops_total), sum(fp16_flops), sum(CASE WHEN reported THEN fp16_flops ELSE 0 END),
           sum(energy_kwh)
    FROM rows HAVING count(*) > 0
),
today AS (
    SELECT m.gpu_model, m.n_jobs, m.flops_total, m.fp16_flops AS fp16_equivalent_flops_total,
           m.reported_flops / m.fp16_flops AS precision_reported_ratio, m.energy_kwh,
           m.fp16_flops / (m.energy_kwh * 3.6e6) AS fp16_equivalent_flops_per_w,
           p.peak_fp16_flops_per_w,
           CASE WHEN m.gpu_model = 'fleet' THEN (SELECT avg(s.temp_c) FROM rows AS r JOIN stg_gpu_samples AS s
                  ON s.gpu_uuid = r.gpu_uuid AND s.sampled_at >= r.started_at AND s.sampled_at < r.ended_at
                  WHERE s.day = $day)
                ELSE t.avg_temp_c END AS avg_temp_c
    FROM per_model AS m
    LEFT JOIN temps AS t USING (gpu_model)
    LEFT JOIN (SELECT DISTINCT gpu_model, peak_fp16_flops_per_w FROM flops_fp16_factor) AS p USING (gpu_model)
),
history AS (
    SELECT gpu_model, day, fp16_equivalent_flops_per_w FROM flops_per_watt_history WHERE day < $day
    UNION ALL
    SELECT gpu_model, CAST($day AS DATE), fp16_equivalent_flops_per_w FROM today
),
first AS (
    SELECT gpu_model, min(day) AS first_day, arg_min(fp16_equivalent_flops_per_w, day) AS first_day_flops_per_w
    FROM history GROUP BY ALL
)
SELECT
    CAST($day AS DATE) AS day, t.gpu_model, t.n_jobs, t.flops_total, t.fp16_equivalent_flops_total,
    t.precision_reported_ratio, t.energy_kwh, t.fp16_equivalent_flops_per_w, t.peak_fp16_flops_per_w, t.avg_temp_c,
    f.first_day, f.first_day_flops_per_w,
    100.0 * (t.fp16_equivalent_flops_per_w / f.first_day_flops_per_w - 1.0) AS gain_vs_first_day_pct,
    f.first_day_flops_per_w * (1.0 + $goal_gain_pct / 100.0) AS goal_flops_per_w
FROM today AS t
JOIN first AS f USING (gpu_model)
ORDER BY t.gpu_model = 'fleet', t.gpu_model
