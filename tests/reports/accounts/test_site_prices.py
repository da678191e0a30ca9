"""[tco] site_prices: a fleet on two sites that buy power from two utilities. Each site's energy is
priced at its own source, its demand charge billed in its own time zone's months, and the
placement advice lists each site's own cheapest hours. The fleet had one price source: site-b's
energy was priced at site-a's flat price, tariff or market node, its billing months were
site-a's, and the advice gave every site the same cheapest hours."""

from __future__ import annotations

import datetime as dt

import pydantic
import pytest

from accounting_world import DAY, build_world
from joulehouse.reports.accounts.attribution import UNALLOCATED
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.reports.export.placement_advice import build_advice
from joulehouse.settings import TcoSettings, load_settings

VIRGINIA_TOU = "prices/openei_urdb_tou_rate_virginia.json"
# The Virginia tariff's rate + adj per period, $/kWh (its energyratestructure, one tier each)
VIRGINIA_USD_PER_KWH = {0: 0.01679 + 0.03255, 1: 0.04944 + 0.03255, 2: 0.14284 + 0.03255}
# Its March period of each UTC hour of Monday 2 March 2026 in New York (UTC-5; March's weekday and
# weekend rows are the same): local 19-21 peak (2), 22-00 shoulder (1), 01-04 off-peak (0),
# 05 shoulder, 06-18 peak.
VIRGINIA_PERIOD_BY_UTC_HOUR = [2, 2, 2, 1, 1, 1, 0, 0, 0, 0, 1] + [2] * 13
PUE = 1.3  # the world without a PUE table: default_pue in every hour


def facility_kwh(gpu: str) -> list[float]:
    """The accounting world's hourly IT energy of `gpu` x the default PUE, kWh: 0.35 kWh (A100) in
    the busy hours 01-05, 0.06 kWh otherwise; the H100 draws 1.6 times that."""
    scale = 1.6 if gpu == "GPU-h100" else 1.0
    return [(0.35 if 1 <= h < 6 else 0.06) * scale * PUE for h in range(24)]


def two_site_world():
    """The accounting world with its H100 (jobs serve-1, prep-1) moved to site-b; the A100
    (train-1, eval-1) stays at site-a."""
    con = build_world(with_pue=False)
    con.execute("UPDATE dim_gpu SET site = 'site-b' WHERE gpu_uuid = 'GPU-h100'")
    return con


def job_usd_per_facility_kwh(con) -> dict[str, float]:
    return {job: usd / kwh for job, usd, kwh in con.execute(
        "SELECT job_id, energy_cost_usd, facility_energy_kwh FROM rpt_tco_daily WHERE job_id <> ? "
        "AND facility_energy_kwh > 0", [UNALLOCATED]).fetchall()}


def site_energy_cost_usd(con) -> dict[str, float]:
    """Each site's energy cost of the day from the hourly context it wrote: price x the site's load."""
    return dict(con.execute("SELECT site, sum(price_usd_per_mwh / 1000 * fleet_facility_energy_kwh) "
                            "FROM rpt_context_price_hourly GROUP BY site").fetchall())


def test_each_site_pays_its_own_flat_price():
    con = two_site_world()
    settings = TcoSettings(flat_price_usd_per_mwh=50.0, site_prices=("site-b|flat|150|America/Chicago",))
    summary = tco_day(con, DAY, settings, None)
    # by hand: site-a (A100) 2.89 kWh IT x 1.3 = 3.757 kWh x 0.050 = 0.18785 USD;
    #          site-b (H100) 4.624 kWh IT x 1.3 = 6.0112 kWh x 0.150 = 0.90168 USD
    assert site_energy_cost_usd(con) == {"site-a": pytest.approx(0.18785), "site-b": pytest.approx(0.90168)}
    assert summary.components_usd["energy_cost_usd"] == pytest.approx(0.18785 + 0.90168)
    prices = dict(con.execute("SELECT site, list(DISTINCT price_usd_per_mwh) FROM rpt_context_price_hourly "
                              "GROUP BY site").fetchall())
    assert prices == {"site-a": [pytest.approx(50.0)], "site-b": [pytest.approx(150.0)]}
    # a job pays the price of the site it ran at
    assert job_usd_per_facility_kwh(con) == {"train-1": pytest.approx(0.05), "eval-1": pytest.approx(0.05),
                                             "serve-1": pytest.approx(0.15), "prep-1": pytest.approx(0.15)}
    assert "site-b: flat 150.0 $/MWh" in summary.method


def test_a_site_on_its_own_time_of_use_tariff_is_priced_at_its_periods(shared_data):
    con = two_site_world()
    tariff = shared_data / VIRGINIA_TOU
    summary = tco_day(con, DAY, TcoSettings(flat_price_usd_per_mwh=50.0,
                                            site_prices=(f"site-b|tariff|{tariff}|America/New_York",)), None)
    site_b = sum(kwh * VIRGINIA_USD_PER_KWH[period]
                 for kwh, period in zip(facility_kwh("GPU-h100"), VIRGINIA_PERIOD_BY_UTC_HOUR))
    assert site_energy_cost_usd(con) == {"site-a": pytest.approx(0.18785), "site-b": pytest.approx(site_b)}
    assert summary.components_usd["energy_cost_usd"] == pytest.approx(0.18785 + site_b)
    assert summary.price_rule_counts == {"flat": 24, "tariff": 24}
    rules = dict(con.execute("SELECT site, any_value(price_rule) FROM rpt_context_price_hourly GROUP BY site").fetchall())
    assert rules == {"site-a": "flat", "site-b": "tariff"}


def price_file(path, prices_by_node: dict[str, float]):
    """A PJM day-ahead file with one flat price per node over 24 Feb - 9 Mar 2025 (the year rule maps
    Monday 2 March 2026 onto Monday 3 March 2025)."""
    lines = ["datetime_beginning_utc,pnode_name,total_lmp_da"]
    start = dt.datetime(2025, 2, 24)
    for h in range(14 * 24):
        t = start + dt.timedelta(hours=h)
        lines += [f"{t:%m/%d/%Y %I:%M:%S %p},{node},{price}" for node, price in prices_by_node.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_site_at_another_market_node_of_the_price_file_pays_that_nodes_price(tmp_path):
    prices = price_file(tmp_path / "da.csv", {"PJM-RTO": 20.0, "DOMINION": 200.0})
    con = two_site_world()
    tco_day(con, DAY, TcoSettings(price_file=str(prices), site_prices=("site-b|market|DOMINION|America/New_York",)),
            None)
    # site-a 3.757 kWh x 0.020 = 0.07514 USD; site-b 6.0112 kWh x 0.200 = 1.20224 USD
    assert site_energy_cost_usd(con) == {"site-a": pytest.approx(0.07514), "site-b": pytest.approx(1.20224)}


def test_a_market_site_without_a_price_file_is_an_error_not_the_fleets_flat_price():
    with pytest.raises(ValueError, match="site 'site-b' is priced at market node 'DOMINION' but no price file"):
        tco_day(two_site_world(), DAY, TcoSettings(site_prices=("site-b|market|DOMINION|America/New_York",)), None)


def turn_day_world(day: dt.date):
    """The two sites on the UTC day of March's turn into April: each GPU draws 2 kW (A100, site-a)
    or 3 kW (H100, site-b) in hours 01-02 UTC and nothing else, at a PUE of 1, no jobs."""
    con = two_site_world()
    for table in ("fct_gpu_energy_hourly", "raw_jobs"):
        con.execute(f"DELETE FROM {table}")
    start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'node-01', ?, ?, ?, ?, 1.0, 'counter')", [
        (start + dt.timedelta(hours=h), day, uuid, model, kwh if h in (1, 2) else 0.0, 0.0)
        for uuid, model, kwh in (("GPU-a100", "NVIDIA A100-SXM4-80GB", 2.0), ("GPU-h100", "NVIDIA H100 80GB HBM3", 3.0))
        for h in range(24)])
    return con


def test_a_sites_demand_charge_is_billed_in_its_own_time_zones_month():
    turn = dt.date(2026, 4, 1)
    con = turn_day_world(turn)
    settings = TcoSettings(demand_charge_usd_per_kw_month=15.0, default_pue=1.0, tariff_timezone="America/New_York",
                           site_prices=("site-b|flat|80|Asia/Tokyo",))
    tco_day(con, turn, settings, None)
    # 01:00-02:59 UTC on 1 April is 31 March (21:00) in New York, 1 April (10:00) in Tokyo: site-a's
    # 2 kW peak is March's (30 USD), site-b's 3 kW April's (45 USD); site-b's whole UTC day is April there
    bills = con.execute("SELECT site, billing_month, demand_charge_usd FROM rpt_demand_peak_daily ORDER BY ALL").fetchall()
    assert bills == [("site-a", dt.date(2026, 3, 1), pytest.approx(30.0)), ("site-a", dt.date(2026, 4, 1), 0.0),
                     ("site-b", dt.date(2026, 4, 1), pytest.approx(45.0))]
    # the next day's 1 kW at site-b raises nothing: April's peak there is already 3 kW
    con.execute("DELETE FROM fct_gpu_energy_hourly")
    next_day = turn + dt.timedelta(days=1)
    con.execute("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'node-01', 'GPU-h100', 'NVIDIA H100 80GB HBM3', 1.0, "
                "1000.0, 1.0, 'counter')", [dt.datetime.combine(next_day, dt.time(5), dt.timezone.utc), next_day])
    summary = tco_day(con, next_day, settings, None)
    assert summary.components_usd["demand_charge_usd"] == 0.0


def test_the_placement_advice_lists_each_sites_own_cheapest_hours(shared_data):
    con = two_site_world()
    settings = TcoSettings(flat_price_usd_per_mwh=50.0,
                           site_prices=(f"site-b|tariff|{shared_data / VIRGINIA_TOU}|America/New_York",))
    tco_day(con, DAY, settings, None)
    advice = build_advice(con, DAY, site="fleet", now=dt.datetime(2026, 3, 3, tzinfo=dt.timezone.utc),
                          validity_hours=24.0, window_hours=6, tco=settings, data_dir=None)
    sites = advice["sites"]
    # site-a, a flat price: no hour is cheaper, so none is listed (the first six of the day were)
    assert sites["site-a"]["cheapest_hours_utc"] == []
    assert "no hour lower than the others in price" in sites["site-a"]["forecast_basis"]
    # site-b, its tariff on Tuesday 3 March (New York, UTC-5): off-peak local 01-04 (06-09 UTC),
    # then the earliest shoulder hours, local 22-23 of Monday (03-04 UTC)
    assert sites["site-b"]["cheapest_hours_utc"] == [f"2026-03-03T0{h}:00:00Z" for h in (3, 4, 6, 7, 8, 9)]
    assert "time-of-use tariff" in sites["site-b"]["forecast_basis"]
    assert "flat price" in sites["site-a"]["forecast_basis"]


def test_an_entry_for_a_site_the_fleet_does_not_have_is_said():
    con = two_site_world()
    summary = tco_day(con, DAY, TcoSettings(site_prices=("site-z|flat|95|UTC",)), None)
    said = [note for note in summary.notes if "site_prices" in note]
    assert said and "'site-z'" in said[0] and "site-a, site-b" in said[0]
    assert site_energy_cost_usd(con) == {"site-a": pytest.approx(3.757 * 0.08), "site-b": pytest.approx(6.0112 * 0.08)}


@pytest.mark.parametrize("entry", [
    "site-b|tariff|tou.json",  # no time zone
    "site-b|flat|cheap|UTC",
    "site-b|flat|-5|UTC",
    "site-b|flat|95|Mars/Olympus",
    "site-b|spot|95|UTC",
    "site-b|tariff|tou.json|UTC|100",
    "|flat|95|UTC",
    "site-b|flat|95|UTC|extra",
])
def test_a_bad_entry_is_a_settings_error_naming_it(entry):
    with pytest.raises(pydantic.ValidationError, match="site price") as caught:
        TcoSettings(site_prices=(entry,))
    assert repr(entry) in str(caught.value)


def test_a_site_given_twice_is_refused():
    with pytest.raises(pydantic.ValidationError, match="'site-b' has an earlier entry"):
        TcoSettings(site_prices=("site-b|flat|95|UTC", "site-b|flat|60|UTC"))


def test_a_relative_tariff_file_is_the_settings_files_folders(tmp_path):
    (tmp_path / "conf").mkdir()
    path = tmp_path / "conf" / "joulehouse.toml"
    path.write_text('[tco]\nsite_prices = ["site-b|tariff|tou.json|America/New_York|0", "site-c|flat|95|UTC"]\n')
    settings = load_settings(path, env={})
    assert settings.tco.site_prices == (f"site-b|tariff|{tmp_path / 'conf' / 'tou.json'}|America/New_York|0",
                                        "site-c|flat|95|UTC")
