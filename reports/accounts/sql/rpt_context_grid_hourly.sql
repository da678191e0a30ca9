-- rpt_context_grid_hourly: the grid and the fleet's load per site and UTC hour of each accounted
-- day (every hour of the day, metered or not); the grid half of rpt_context_hourly.
-- kind: day
-- grain: one row per (hour_at, site, region): a site has two regions where a GPU outside the
--   inventory takes [carbon] region; each row carries its own region's GPUs' load
-- Written by reports.accounts.carbon.carbon_day.
-- columns:
--   hour_at [TIMESTAMPTZ, UTC] start of the hour
--   day [DATE] UTC day of hour_at
--   site [text] site
--   region [text] grid region
--   intensity_gco2e_per_kwh [gCO2e/kWh] grid carbon intensity (basis of CarbonSettings)
--   renewable_pct [%] of generation (NULL where unknown)
--   intensity_rule [text] how the hour's value was found (reports.accounts.yearmap)
--   pue [ratio] facility / IT energy, measured or default
--   fleet_it_energy_kwh [kWh] IT energy in the accounts' basis (NULL when no GPU-hour's energy was measured)
--   fleet_gpu_energy_kwh [kWh] GPU board energy
--   fleet_facility_energy_kwh [kWh] energy at the meter = IT x PUE
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
