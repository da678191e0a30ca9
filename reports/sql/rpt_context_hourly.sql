-- rpt_context_hourly: grid intensity, price and the fleet's load per site and UTC hour, the
-- hourly context the report draws against the load. The grid half comes from carbon_day, the
-- price half from tco_day; a day accounted by only one of them has NULLs in the other's columns.
-- Grain: one row per (hour_at, site). hour_at TIMESTAMPTZ (UTC), day DATE, site, region,
-- intensity_gco2e_per_kwh (gCO2e/kWh), price_usd_per_mwh (USD/MWh), renewable_pct (%),
-- fleet_it_energy_kwh (kWh IT), fleet_facility_energy_kwh (kWh at the meter), fleet_gpu_energy_kwh
-- (kWh GPU board), pue (ratio), intensity_rule, price_rule.
CREATE OR REPLACE VIEW rpt_context_hourly AS
WITH grid AS (
    SELECT * FROM rpt_context_grid_hourly
),
price AS (
    SELECT * FROM rpt_context_price_hourly
),
joined AS (
    SELECT
        coalesce(grid.hour_at, price.hour_at) AS hour_at,
        coalesce(grid.day, price.day) AS day,
        coalesce(grid.site, price.site) AS site,
        coalesce(grid.region, price.region) AS region,
        grid.intensity_gco2e_per_kwh,
        price.price_usd_per_mwh,
        grid.renewable_pct,
        coalesce(grid.fleet_it_energy_kwh, price.fleet_it_energy_kwh) AS fleet_it_energy_kwh,
        coalesce(grid.fleet_facility_energy_kwh, price.fleet_facility_energy_kwh) AS fleet_facility_energy_kwh,
        grid.fleet_gpu_energy_kwh,
        grid.pue,
        grid.intensity_rule,
        price.price_rule
    FROM grid
    FULL OUTER JOIN price ON grid.hour_at = price.hour_at AND grid.site = price.site
)
SELECT * FROM joined
