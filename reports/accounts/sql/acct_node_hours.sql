-- acct_node_hours: each server's BMC (IPMI) energy per hour of one day, as the accounts read it.
-- Grain: one row per (hour_at, host). Parameters: $day (DATE).
-- hour_at TIMESTAMPTZ (UTC start of hour), host, energy_kwh (kWh over the covered part of the
-- hour, NULL when none covered), coverage_ratio (0..1 of the hour with readings).
WITH node_hours AS (
    SELECT hour_at, host, energy_kwh, coverage_ratio
    FROM fct_node_energy_hourly
    WHERE day = $day
)
SELECT * FROM node_hours ORDER BY host, hour_at
