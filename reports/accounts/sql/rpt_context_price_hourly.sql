-- rpt_context_price_hourly: the electricity price and the fleet's load per site and UTC hour of
-- each accounted day (every hour of the day, metered or not); the price half of rpt_context_hourly.
-- kind: day
-- grain: one row per (hour_at, site, region): a site has two regions where a GPU outside the
--   inventory takes [carbon] region; each row carries its own region's GPUs' load
-- Written by reports.accounts.tco.tco_day.
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   site [text] site
--   region [text] grid region
--   price_usd_per_mwh [USD/MWh] market, tariff or flat price (TcoSettings)
--   price_rule [text] how the hour's price was found
--   fleet_it_energy_kwh [kWh] IT energy, as in rpt_context_grid_hourly (NULL when no GPU-hour's energy was measured)
--   fleet_facility_energy_kwh [kWh] energy at the meter (NULL when no GPU-hour's energy was measured)
--   green_premium_applies [bool] the green premium's rule selects the hour (renewable share below
--     [tco].green_premium_below_renewable_pct); NULL where the share is unknown (no premium)
CREATE TABLE IF NOT EXISTS rpt_context_price_hourly (
    hour_at TIMESTAMPTZ NOT NULL,
    day DATE NOT NULL,
    site VARCHAR NOT NULL,
    region VARCHAR,
    price_usd_per_mwh DOUBLE,
    price_rule VARCHAR,
    fleet_it_energy_kwh DOUBLE,
    fleet_facility_energy_kwh DOUBLE,
    green_premium_applies BOOLEAN
);
-- Databases created before the green premium's rule was recorded gain its column.
ALTER TABLE rpt_context_price_hourly ADD COLUMN IF NOT EXISTS green_premium_applies BOOLEAN
