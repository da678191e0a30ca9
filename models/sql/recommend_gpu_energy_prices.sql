-- recommend_gpu_energy_prices: what a kWh of each GPU's energy cost on $day, from the hourly context
-- the carbon and cost accounts wrote (rpt_context_hourly: price, grid intensity, PUE per site-hour).
-- Grain: gpu_uuid. Parameters: $day DATE.
-- Inputs: fct_gpu_energy_hourly (the GPU's energy per hour), reco_input_gpu_sites (temp view:
--   gpu_uuid, site from the inventory; empty without one), rpt_context_hourly. A GPU the inventory
--   does not place is at the day's only site, else at 'unknown', as the accounts place it.
-- Columns: gpu_uuid, price_usd_per_kwh (USD/kWh at the IT meter's side: the hour's price, before
--   PUE), grid_gco2e_per_kwh (gCO2e/kWh), pue (ratio), each weighted by the GPU's energy over the
--   hours that have it (NULL where none does), n_hours (hours with context and energy).
WITH context AS (
    SELECT hour_at, site, price_usd_per_mwh / 1000.0 AS price_usd_per_kwh, intensity_gco2e_per_kwh, pue
    FROM rpt_context_hourly
    WHERE day = $day
),
only_site AS (
    SELECT CASE WHEN count(DISTINCT site) = 1 THEN any_value(site) ELSE 'unknown' END AS site FROM context
),
gpu_hours AS (
    SELECT e.hour_at, e.gpu_uuid, e.energy_kwh, coalesce(s.site, (SELECT site FROM only_site)) AS site
    FROM fct_gpu_energy_hourly AS e
    LEFT JOIN reco_input_gpu_sites AS s USING (gpu_uuid)
    WHERE e.day = $day AND e.energy_kwh > 0
)
SELECT
    g.gpu_uuid,
    sum(g.energy_kwh * c.price_usd_per_kwh) / nullif(sum(g.energy_kwh) FILTER (WHERE c.price_usd_per_kwh IS NOT NULL), 0)
        AS price_usd_per_kwh,
    sum(g.energy_kwh * c.intensity_gco2e_per_kwh)
        / nullif(sum(g.energy_kwh) FILTER (WHERE c.intensity_gco2e_per_kwh IS NOT NULL), 0) AS grid_gco2e_per_kwh,
    sum(g.energy_kwh * c.pue) / nullif(sum(g.energy_kwh) FILTER (WHERE c.pue IS NOT NULL), 0) AS pue,
    count(c.hour_at) AS n_hours
FROM gpu_hours AS g
JOIN context AS c ON c.hour_at = g.hour_at AND c.site = g.site
GROUP BY g.gpu_uuid
