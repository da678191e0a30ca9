-- rpt_context_price_hourly: the electricity price and the fleet's load per site and UTC hour of
-- each accounted day (every hour of the day, metered or not); the price half of rpt_context_hourly.
-- kind: day
-- grain: one row per (hour_at, site)
-- Written by reports.accounts.tco.tco_day.
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   site [text] site
--   region [text] grid region
--   price_usd_per_mwh [USD/MWh] market, tariff or flat price (TcoSettings)
--   price_rule [text] how the hour's price was found
--   fleet_it_energy_kwh [kWh] IT energy, as in rpt_context_grid_hourly (NULL when no GPU-hour was metered)
--   fleet_facility_energy_kwh [kWh] energy at the meter (NULL when no GPU-hour was metered)
CREATE TABLE IF NOT EXISTS rpt_context_price_hourly (
    hour_at TIMESTAMPTZ NOT NULL,
    day DATE NOT NULL,
    site VARCHAR NOT NULL,
    region VARCHAR,
    price_usd_per_mwh DOUBLE,
    price_rule VARCHAR,
    fleet_it_energy_kwh DOUBLE,
    fleet_facility_energy_kwh DOUBLE
)
