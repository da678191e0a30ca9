-- recommend_gpu_energy_prices: what a kWh of each GPU's energy cost on $day, from the hourly context
-- the carbon and cost accounts wrote (rpt_context_hourly: price, grid intensity, PUE per site-hour).
-- Grain: gpu_uuid. Parameters: $day DATE, $day_start and $day_end (its UTC bounds), $max_pue
-- (collectors.settings.MAX_PUE).
-- Inputs: fct_gpu_energy_hourly (the GPU's energy per hour), reco_input_gpu_sites (temp view:
--   gpu_uuid, site, region from the inventory; empty without one), reco_input_pue_hours (temp view: hour_at,
--   site, pue of fct_pue_hourly; empty without it), rpt_context_hourly.
-- A GPU the inventory does not place is where the accounts put it (reports/accounts/warehouse_io.py):
-- at the context's only site, where every GPU-hour of the day was accounted, else at the day's only
-- metered site (its PUE hours between 1 and $max_pue, as acct_pue_hours.sql reads them), else at
-- 'unknown'. Taken from the context's sites alone, a fleet listed at two sites with one meter left
-- such a GPU at 'unknown', which has no context then: it was priced at the defaults, not at the
-- site whose price and PUE the accounts gave it.
-- Columns: gpu_uuid, site (where it was priced), at_no_site (it is at 'unknown' beside the day's known
--   sites, metered or in the context: no utility meters it, and the cost accounts bill it no demand
--   charge, reports/accounts/fleet_hours.py), price_usd_per_kwh (USD/kWh at the IT meter's side: the
--   hour's price, before PUE), grid_gco2e_per_kwh (gCO2e/kWh), pue (ratio), each weighted by the
--   GPU's energy over the hours that have it (NULL where none does), n_hours (hours with context and
--   energy). Each GPU-hour reads its own region's context row (a site holds two where an unlisted GPU
--   takes the fallback [carbon] region); a GPU without an inventory region reads the fallback's.
WITH context AS (
    SELECT hour_at, site, region, price_usd_per_mwh / 1000.0 AS price_usd_per_kwh, intensity_gco2e_per_kwh, pue,
           count(*) OVER (PARTITION BY hour_at, site) AS regions_at_site
    FROM rpt_context_hourly
    WHERE day = $day
),
listed_regions AS (
    -- the regions the inventory gives a site's GPUs: a GPU without one is at the accounts' fallback
    -- ([carbon] region), the site's other region row
    SELECT DISTINCT site, region FROM reco_input_gpu_sites WHERE region IS NOT NULL
),
metered_sites AS (
    SELECT DISTINCT site
    FROM reco_input_pue_hours
    WHERE hour_at >= $day_start AND hour_at < $day_end AND pue BETWEEN 1 AND $max_pue
),
context_sites AS (
    SELECT DISTINCT site FROM context
),
placement AS (
    SELECT CASE WHEN (SELECT count(*) FROM context_sites) = 1 THEN (SELECT any_value(site) FROM context_sites)
                WHEN count(*) = 1 THEN any_value(site) ELSE 'unknown' END AS site,
           count(*) > 1 OR EXISTS (SELECT 1 FROM context_sites WHERE site <> 'unknown') AS known_sites
    FROM metered_sites
),
gpu_hours AS (
    SELECT e.hour_at, e.gpu_uuid, e.energy_kwh, coalesce(s.site, p.site) AS site, s.region,
           s.site IS NULL AND p.site = 'unknown' AND p.known_sites AS at_no_site
    FROM fct_gpu_energy_hourly AS e
    LEFT JOIN reco_input_gpu_sites AS s USING (gpu_uuid)
    CROSS JOIN placement AS p
    WHERE e.day = $day AND e.energy_kwh > 0
)
SELECT
    g.gpu_uuid,
    any_value(g.site) AS site,
    bool_or(g.at_no_site) AS at_no_site,
    sum(g.energy_kwh * c.price_usd_per_kwh) / nullif(sum(g.energy_kwh) FILTER (WHERE c.price_usd_per_kwh IS NOT NULL), 0)
        AS price_usd_per_kwh,
    sum(g.energy_kwh * c.intensity_gco2e_per_kwh)
        / nullif(sum(g.energy_kwh) FILTER (WHERE c.intensity_gco2e_per_kwh IS NOT NULL), 0) AS grid_gco2e_per_kwh,
    sum(g.energy_kwh * c.pue) / nullif(sum(g.energy_kwh) FILTER (WHERE c.pue IS NOT NULL), 0) AS pue,
    count(c.hour_at) AS n_hours
FROM gpu_hours AS g
JOIN context AS c ON c.hour_at = g.hour_at AND c.site = g.site
    -- each GPU's own region's row: by site alone, a site with an unlisted GPU's fallback region beside
    -- its own averaged the two intensities (an FR GPU at 50 g beside DE rows at 450 g read 250 g)
    AND (c.region IS NOT DISTINCT FROM g.region OR c.regions_at_site = 1
         OR (g.region IS NULL AND c.region NOT IN (SELECT region FROM listed_regions AS l WHERE l.site = g.site)))
GROUP BY g.gpu_uuid
