"""rpt_context_hourly: every UTC hour of the accounted day, intensity from carbon_day, price from
tco_day, the fleet's load adding up to the accounts; and the cost range."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting_world import DAY, UTC, add_node_energy, build_world
from joulehouse.settings import CarbonSettings, TcoSettings
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.warehouse_io import replace_report_day
from joulehouse.reports.accounts.tco import tco_day


def context(con):
    return con.execute("SELECT hour_at, site, intensity_gco2e_per_kwh, price_usd_per_mwh, renewable_pct, "
                       "fleet_it_energy_kwh, fleet_facility_energy_kwh FROM rpt_context_hourly WHERE day = ? "
                       "ORDER BY hour_at", [DAY]).fetchall()


def test_context_has_every_hour_of_the_day_and_the_load_adds_up(shared_data):
    con = build_world()
    add_node_energy(con)
    carbon = carbon_day(con, DAY, CarbonSettings(), shared_data)
    only_grid = context(con)
    assert all(r[3] is None for r in only_grid)  # price is tco_day's half
    tco = tco_day(con, DAY, TcoSettings(), shared_data)
    rows = context(con)
    start = dt.datetime(DAY.year, DAY.month, DAY.day, tzinfo=UTC)
    assert [r[0].astimezone(UTC) for r in rows] == [start + dt.timedelta(hours=h) for h in range(24)]
    assert {r[1] for r in rows} == {"site-a"}
    assert all(r[2] > 0 and r[3] is not None and r[4] is not None for r in rows)
    assert sum(r[5] for r in rows) == pytest.approx(carbon.energy_kwh)  # IT energy at the chosen basis
    assert sum(r[6] for r in rows) == pytest.approx(carbon.facility_energy_kwh)
    assert tco.energy_kwh == pytest.approx(carbon.energy_kwh)
    # Re-running replaces the day: still one row per hour.
    carbon_day(con, DAY, CarbonSettings(), shared_data)
    tco_day(con, DAY, TcoSettings(), shared_data)
    assert len(context(con)) == 24


def test_a_site_in_two_regions_has_a_row_per_region_with_its_own_load(shared_data):
    """A GPU outside the inventory takes [carbon] region: joined by site alone, each region's row
    carried both regions' load, and the view's join by site doubled it again (4x the fleet)."""
    con = build_world()
    con.execute("DELETE FROM dim_gpu WHERE gpu_uuid = 'GPU-h100'")  # not yet in the inventory
    carbon = carbon_day(con, DAY, CarbonSettings(region="CAISO_NORTH"), shared_data)
    tco_day(con, DAY, TcoSettings(), shared_data)
    rows = con.execute("SELECT region, count(*), sum(fleet_it_energy_kwh) FROM rpt_context_hourly WHERE day = ? "
                       "GROUP BY region ORDER BY region", [DAY]).fetchall()
    by_gpu = dict(con.execute("SELECT gpu_uuid, sum(energy_kwh) FROM fct_gpu_energy_hourly GROUP BY 1").fetchall())
    assert [(r, n) for r, n, _ in rows] == [("CAISO_NORTH", 24), ("FR", 24)]
    assert rows[0][2] == pytest.approx(by_gpu["GPU-h100"]) and rows[1][2] == pytest.approx(by_gpu["GPU-a100"])
    assert sum(r[2] for r in rows) == pytest.approx(carbon.energy_kwh)


def test_hours_without_metering_have_null_load_not_zero(shared_data):
    con = build_world()
    con.execute("DELETE FROM fct_gpu_energy_hourly WHERE hour(hour_at) >= 12")
    carbon_day(con, DAY, CarbonSettings(), shared_data)
    rows = context(con)
    assert len(rows) == 24 and all(r[5] is None for r in rows[12:]) and all(r[5] > 0 for r in rows[:12])
    assert all(r[2] is not None for r in rows)  # the grid is known whether or not we metered


def test_cost_range_moves_only_the_price_driven_components(shared_data):
    con = build_world()
    central = tco_day(con, DAY, TcoSettings(price_uncertainty_pct=0.0), shared_data)
    assert central.total_cost_low_usd == pytest.approx(central.total_cost_usd) == pytest.approx(central.total_cost_high_usd)
    ranged = tco_day(con, DAY, TcoSettings(price_uncertainty_pct=20.0), shared_data)
    driven = sum(abs(ranged.components_usd[c]) for c in ("energy_cost_usd", "green_premium_usd", "density_surcharge_usd"))
    assert ranged.total_cost_high_usd - ranged.total_cost_usd == pytest.approx(0.2 * driven, rel=1e-9)
    assert ranged.total_cost_usd - ranged.total_cost_low_usd == pytest.approx(0.2 * driven, rel=1e-9)
    with pytest.raises(ValueError, match="price_uncertainty_pct"):
        tco_day(con, DAY, TcoSettings(price_uncertainty_pct=-1.0), shared_data)


def test_only_the_allow_listed_report_tables_can_be_replaced():
    con = build_world()
    with pytest.raises(ValueError, match="report table 'fct_gpu_energy_hourly'"):
        replace_report_day(con, "fct_gpu_energy_hourly", DAY, None)


def test_a_report_table_from_before_the_it_basis_gains_its_columns(shared_data):
    con = build_world()
    con.execute("CREATE TABLE rpt_carbon_daily (day DATE NOT NULL, team VARCHAR NOT NULL, \"user\" VARCHAR NOT NULL, "
                "job_id VARCHAR NOT NULL, stage VARCHAR NOT NULL, gpu_hours DOUBLE, energy_kwh DOUBLE, "
                "facility_energy_kwh DOUBLE, location_gco2e DOUBLE, market_gco2e DOUBLE, embodied_gco2e DOUBLE, "
                "total_gco2e DOUBLE, total_market_gco2e DOUBLE, total_low_gco2e DOUBLE, total_high_gco2e DOUBLE, "
                "flops_total DOUBLE)")
    summary = carbon_day(con, DAY, CarbonSettings(), shared_data)
    written = con.execute("SELECT count(it_energy_basis), sum(gpu_energy_kwh) FROM rpt_carbon_daily").fetchone()
    assert written == (summary.rows_written, pytest.approx(summary.gpu_energy_kwh))
