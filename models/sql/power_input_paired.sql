-- power_input_paired: samples from elsewhere (an import, a test frame) without interval_s, with the
-- time to the next reading of the same stream (as stg_gpu_samples pairs them: two sources'
-- readings interleaved would halve it). models.power_features computes it once, into a temp table
-- (a view would sort again for every query of the fit). Input: the temp view power_input_base.
-- columns: the input's, plus interval_s [s] (NULL on a stream's last reading)
SELECT
    *,
    epoch(lead(sampled_at) OVER (PARTITION BY host, gpu_uuid, source ORDER BY sampled_at)) - epoch(sampled_at)
        AS interval_s
FROM power_input_base
