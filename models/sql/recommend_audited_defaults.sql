-- recommend_audited_defaults: per GPU, the power limit it held before joulehouse first set it:
-- power_limit_w_before of its first 'apply' in the agent's audit (raw_agent_audit). After a cap
-- the GPU's readings show only the cap; this is the device's own default (models.device_limits).
-- Later applies' limits before are the agent's own caps, so only the first counts; its limit before
-- is NULL where the agent could not read it (models.device_limits then takes none from here).
-- Parameters: $day DATE (audit rows of days up to and including it are read).
-- Columns: gpu_uuid, power_limit_w_before (W).
WITH applies AS (
    SELECT gpu_uuid, power_limit_w_before,
           row_number() OVER (PARTITION BY gpu_uuid ORDER BY audited_at, power_limit_w_before DESC NULLS LAST)
               AS nth_apply
    FROM raw_agent_audit
    WHERE action = 'apply' AND gpu_uuid IS NOT NULL AND date <= $day
)
SELECT gpu_uuid, power_limit_w_before
FROM applies
WHERE nth_apply = 1
