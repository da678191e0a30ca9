"""`joulehouse tco estimate --site`: a what-if run at a site with its own [tco] site_prices entry
is priced as the daily accounts price that site's energy, and its demand charge billed in the
site's time zone's months.

The estimate had no site: with site-b on its own 150 USD/MWh and the fleet on 50, site-b's 6.0112
kWh of the accounted day cost 0.90168 USD in the daily accounts and 0.30056 USD in the estimate of
the same energy."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from accounting_world import DAY, build_world
from test_site_prices import price_file
from joulehouse.cli.tco import register
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.settings import load_settings

PUE = 1.3  # the accounting world without a PUE table: default_pue in every hour
VIRGINIA_TOU = "prices/openei_urdb_tou_rate_virginia.json"


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def estimate(app, *args: str) -> dict:
    result = CliRunner().invoke(app, ["tco", "estimate", "--format", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def settings_file(tmp_path, *lines: str):
    path = tmp_path / "joulehouse.toml"
    path.write_text("[tco]\n" + "\n".join(lines) + "\n")
    return path


def accounted_sites(config) -> dict[str, tuple[float, float, list[float]]]:
    """The daily accounts of the accounting world with its H100 at site-b, under `config`: each
    site's (facility kWh, energy cost USD, hourly prices USD/MWh by UTC hour)."""
    con = build_world(with_pue=False)
    con.execute("UPDATE dim_gpu SET site = 'site-b' WHERE gpu_uuid = 'GPU-h100'")
    tco_day(con, DAY, load_settings(config).tco, None)
    rows = con.execute("SELECT site, sum(fleet_facility_energy_kwh), sum(price_usd_per_mwh / 1000 * fleet_facility_energy_kwh), "
                       "list(price_usd_per_mwh ORDER BY hour_at) FROM rpt_context_price_hourly GROUP BY site").fetchall()
    return {site: (kwh, usd, prices) for site, kwh, usd, prices in rows}


def same_energy(kwh: float) -> list[str]:
    """An estimate's run of `kwh` at the meter: one 1 kW GPU at the accounting world's PUE."""
    return ["--gpus", "1", "--hours", repr(kwh / PUE), "--avg-power-w", "1000", "--pue", str(PUE)]


def test_a_site_on_its_own_flat_price_is_estimated_at_the_price_the_daily_accounts_charge(app, tmp_path):
    config = settings_file(tmp_path, "flat_price_usd_per_mwh = 50.0",
                           'site_prices = ["site-b|flat|150|America/Chicago"]')
    daily = accounted_sites(config)
    for site in ("site-a", "site-b"):
        kwh, usd, _ = daily[site]
        out = estimate(app, *same_energy(kwh), "--site", site, "--config", str(config))
        assert out["energy_kwh"] == pytest.approx(kwh)
        assert out["energy_cost_usd"] == pytest.approx(usd)
    assert daily["site-b"][1] / daily["site-b"][0] == pytest.approx(0.150)  # the entry's price, not the fleet's
    said = estimate(app, *same_energy(1.0), "--site", "site-b", "--start", "2026-03-02T00:00Z", "--config", str(config))
    # a start prices the run's hours, and a flat site has the same price in every hour (not the reference file's)
    assert said["price_usd_per_mwh"] == 150.0 and "site_prices entry (flat, America/Chicago)" in said["method"]


def test_a_site_on_its_own_tariff_is_estimated_at_the_tariffs_hours_the_daily_accounts_charge(app, tmp_path, shared_data):
    config = settings_file(tmp_path, "flat_price_usd_per_mwh = 50.0",
                           f'site_prices = ["site-b|tariff|{shared_data / VIRGINIA_TOU}|America/New_York"]')
    daily = accounted_sites(config)
    out = estimate(app, "--gpus", "8", "--hours", "24", "--avg-power-w", "500", "--start", f"{DAY}T00:00Z",
                   "--site", "site-b", "--config", str(config))
    hourly = daily["site-b"][2]
    assert len(set(hourly)) > 1  # the day spans the tariff's periods
    # a run at constant power over the accounted day: the plain mean of the day's hourly prices
    assert out["price_usd_per_mwh"] == pytest.approx(sum(hourly) / 24, abs=1e-4)


def test_a_site_at_its_own_market_node_is_estimated_at_that_nodes_price(app, tmp_path):
    prices = price_file(tmp_path / "da.csv", {"PJM-RTO": 20.0, "DOMINION": 200.0})
    config = settings_file(tmp_path, f'price_file = "{prices}"',
                           'site_prices = ["site-b|market|DOMINION|America/New_York"]')
    daily = accounted_sites(config)
    run = ["--gpus", "8", "--hours", "24", "--avg-power-w", "500", "--start", f"{DAY}T00:00Z", "--config", str(config)]
    for site in ("site-a", "site-b"):
        out = estimate(app, *run, "--site", site)
        assert out["price_usd_per_mwh"] == pytest.approx(daily[site][1] / daily[site][0] * 1000)
    assert estimate(app, *run, "--site", "site-b")["price_usd_per_mwh"] == pytest.approx(200.0)


def test_a_sites_demand_charge_is_billed_in_its_own_time_zones_months(app, tmp_path):
    config = settings_file(tmp_path, "demand_charge_usd_per_kw_month = 15.0", 'tariff_timezone = "America/New_York"',
                           'site_prices = ["site-b|flat|80|Asia/Tokyo"]')
    # 14:00-16:00 UTC on 31 March: still March in New York, March's last and April's first hour in Tokyo
    run = ["--gpus", "1", "--hours", "2", "--avg-power-w", "1000", "--pue", "1", "--start", "2026-03-31T14:00Z",
           "--config", str(config)]
    assert estimate(app, *run, "--site", "site-a")["demand_charge_usd"] == pytest.approx(15.0)  # 1 kW, one bill
    assert estimate(app, *run, "--site", "site-b")["demand_charge_usd"] == pytest.approx(30.0)  # a bill each month


def test_a_site_without_an_entry_is_said_to_take_the_fleets_price(app, tmp_path):
    config = settings_file(tmp_path, "flat_price_usd_per_mwh = 50.0", 'site_prices = ["site-b|flat|150|UTC"]')
    out = estimate(app, *same_energy(1.0), "--site", "site-B", "--config", str(config))
    assert out["price_usd_per_mwh"] == 50.0
    assert "site 'site-B' has no [tco] site_prices entry" in out["method"]


@pytest.mark.parametrize("args, says", [
    (["--site", ""], "--site '': expected a value"),
    (["--site", "site-b", "--start", "2026-03-02T00:00Z", "--price-node", "DOM"], "is priced by its [tco] site_prices"),
])
def test_options_that_would_price_nothing_are_refused(app, tmp_path, args, says):
    config = settings_file(tmp_path, 'site_prices = ["site-b|flat|150|UTC"]')
    result = CliRunner().invoke(app, ["tco", "estimate", *same_energy(1.0), *args, "--config", str(config)])
    assert result.exit_code == 2 and says in result.output, result.output


def test_a_huge_site_name_no_entry_names_is_echoed_cut_short(app, tmp_path):
    """The method named the site whole: a 100,000-character --site came back in the JSON whole."""
    config = settings_file(tmp_path, 'site_prices = ["site-b|flat|150|UTC"]')
    out = estimate(app, *same_energy(1.0), "--site", "A" * 100_000, "--config", str(config))
    assert "(100,000 characters) has no [tco] site_prices entry" in out["method"] and len(out["method"]) < 2_000
