-- rpt_context_price_hourly: the electricity price and the fleet's load per site and UTC hour of
-- each accounted day, written by reports.tco.tco_day (every hour of the day, metered or not).
-- Grain: one row per (hour_at, site). hour_at TIMESTAMPTZ (UTC start of hour), day DATE, site,
-- region, price_usd_per_mwh (USD/MWh, market, tariff or flat: TcoSettings), price_rule (how the
-- hour's price was found), fleet_it_energy_kwh / fleet_facility_energy_kwh (kWh, as in
-- rpt_context_grid_hourly, NULL when no GPU-hour was metered).
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
