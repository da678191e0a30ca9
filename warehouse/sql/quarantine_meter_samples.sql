-- quarantine_meter_samples: server (IPMI) and site meter readings of the day that the hourly
-- energy leaves out, each with the rule it broke. A reading with no power at all is missing, not
-- bad: it is not here (it only lowers coverage_ratio).
-- kind: day
-- grain: one row per raw node_samples or facility_samples reading of the day that broke a rule
-- columns:
--   day [DATE] UTC day of sampled_at
--   dataset [text] node_samples or facility_samples
--   host [text] the server (node_samples) or the site (facility_samples)
--   sampled_at [TIMESTAMPTZ, UTC] when it was read
--   source [text] what read it
--   power_w [W] the server's power (node_samples: DCMI power_w, else sdr_power_w, as
--     fct_node_energy_hourly reads it) or the facility meter's (facility_samples)
--   it_power_w [W] the site's IT meter (facility_samples; NULL for node_samples)
--   reason [text] the first rule broken: power_not_finite (NaN or infinite), power_negative, or
--     duplicate_key (another good reading of the same meter at the same instant comes first, and
--     fct_node_energy_hourly / fct_pue_hourly take that one: for a server, of one stream, the
--     lowest power (each source of a server is a stream of its own, its SDR sensor's readings
--     another); for a site, the lowest source name, then the lowest powers)
WITH readings AS (
    SELECT 'node_samples' AS dataset, host, sampled_at, source, coalesce(power_w, sdr_power_w)::DOUBLE AS power_w,
           NULL::DOUBLE AS it_power_w,
           -- the stream fct_node_energy_hourly reads it in: the SDR sensor's readings are their own
           CASE WHEN power_w IS NULL AND sdr_power_w IS NOT NULL THEN coalesce(source, '') || '/sdr'
                ELSE coalesce(source, '') END AS stream
    FROM raw_node_samples
    WHERE date = $day::DATE
    UNION ALL
    SELECT 'facility_samples', site, sampled_at, source, facility_power_w::DOUBLE, it_power_w::DOUBLE, NULL
    FROM raw_facility_samples
    WHERE date = $day::DATE
),
valued AS (
    SELECT
        *,
        CASE
            WHEN NOT coalesce(isfinite(power_w), true) OR NOT coalesce(isfinite(it_power_w), true)
                THEN 'power_not_finite'
            WHEN power_w < 0 OR it_power_w < 0 THEN 'power_negative'
        END AS value_reason
    FROM readings
),
usable AS (
    -- what the energy queries keep before they rank: good values, and every meter they need present
    SELECT *, value_reason IS NULL AND power_w IS NOT NULL
              AND (dataset = 'node_samples' OR it_power_w IS NOT NULL) AS is_usable
    FROM valued
),
ranked AS (
    SELECT
        *,
        row_number() OVER (PARTITION BY dataset, host, sampled_at, is_usable, stream
                           ORDER BY source, power_w, it_power_w) AS key_rank
    FROM usable
)
SELECT
    $day::DATE AS day, dataset, host, sampled_at, source, power_w, it_power_w,
    coalesce(value_reason, 'duplicate_key') AS reason
FROM ranked
WHERE value_reason IS NOT NULL OR (is_usable AND key_rank > 1)
