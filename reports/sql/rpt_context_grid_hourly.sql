-- rpt_context_grid_hourly: the grid and the fleet's load per site and UTC hour of each accounted
-- day, written by reports.carbon.carbon_day (every hour of the day, metered or not).
-- Grain: one row per (hour_at, site). hour_at TIMESTAMPTZ (UTC start of hour), day DATE, site,
-- region, intensity_gco2e_per_kwh (gCO2e/kWh, grid, basis of CarbonSettings), renewable_pct
-- (% of generation, NULL where unknown), intensity_rule (how the hour's value was found:
-- reports.yearmap), pue (ratio, measured or default), fleet_it_energy_kwh (kWh IT in the
-- accounts' basis, NULL when no GPU-hour was metered), fleet_gpu_energy_kwh (kWh GPU board),
-- fleet_facility_energy_kwh (kWh at the meter = IT x PUE).
CREATE TABLE IF NOT EXISTS rpt_context_grid_hourly (
    hour_at TIMESTAMPTZ NOT NULL,
    day DATE NOT NULL,
    site VARCHAR NOT NULL,
    region VARCHAR,
    intensity_gco2e_per_kwh DOUBLE,
    renewable_pct DOUBLE,
    intensity_rule VARCHAR,
    pue DOUBLE,
    fleet_it_energy_kwh DOUBLE,
    fleet_gpu_energy_kwh DOUBLE,
    fleet_facility_energy_kwh DOUBLE
)
