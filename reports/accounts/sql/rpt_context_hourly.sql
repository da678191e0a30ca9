-- rpt_context_hourly: grid intensity, price and the fleet's load per site and UTC hour, the
-- hourly context the report draws against the load.
-- kind: view
-- grain: one row per (hour_at, site, region): a site has two regions where a GPU outside the
--   inventory takes [carbon] region; each row carries its own region's GPUs' load
-- The grid half comes from carbon_day (rpt_context_grid_hourly), the price half from tco_day
-- (rpt_context_price_hourly); a day accounted by only one of them has NULLs in the other's columns.
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   site [text] site
--   region [text] grid region
--   intensity_gco2e_per_kwh [gCO2e/kWh] grid carbon intensity
--   price_usd_per_mwh [USD/MWh] electricity price
--   renewable_pct [%] of generation
--   fleet_it_energy_kwh [kWh] IT energy
--   fleet_facility_energy_kwh [kWh] energy at the meter
--   fleet_gpu_energy_kwh [kWh] GPU board energy
--   pue [ratio] facility / IT energy
--   intensity_rule [text] how the hour's intensity was found
--   price_rule [text] how the hour's price was found
--   green_premium_applies [bool] the green premium's rule selects the hour (rpt_context_price_hourly)
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
        price.price_rule,
        price.green_premium_applies
    FROM grid
    FULL OUTER JOIN price
        ON grid.hour_at = price.hour_at AND grid.site = price.site AND grid.region IS NOT DISTINCT FROM price.region
)
SELECT * FROM joined
