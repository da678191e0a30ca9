"""The placement advice reads each price source of the next day once, however many sites share it.

Every site of a fleet on the fleet's one day-ahead file or tariff re-read and re-parsed that file:
50 sites on a 1.6 MB day-ahead file took 1.46 s of parsing where one read takes 0.05 s. A site
with its own [tco] site_prices source still gets its own prices."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb

import joulehouse.reports.export.day_ahead as day_ahead
from joulehouse.reports.export.placement_advice import build_advice
from joulehouse.settings import TcoSettings

DAY = dt.date(2026, 6, 11)
NOW = dt.datetime(2026, 6, 12, 18, tzinfo=dt.timezone.utc)  # after the next day's market cleared
NEXT_DAY = DAY + dt.timedelta(days=1)
# the next day's day-ahead price, USD/MWh, by UTC hour: cheapest at 03:00, then 02:00 and 04:00
NEXT_DAY_USD_PER_MWH = [40.0 + abs(h - 3) * 2 for h in range(24)]


def day_ahead_file(path: Path) -> Path:
    """A PJM Data Miner 2 day-ahead export (the real files' columns) of node PJM-RTO over NEXT_DAY."""
    lines = ["datetime_beginning_utc,datetime_beginning_ept,pnode_id,pnode_name,voltage,equipment,type,zone,"
             "system_energy_price_da,total_lmp_da,congestion_price_da,marginal_loss_price_da,row_is_current,version_nbr"]
    start = dt.datetime.combine(NEXT_DAY, dt.time())
    for h, price in enumerate(NEXT_DAY_USD_PER_MWH):
        lines.append(f"{start + dt.timedelta(hours=h):%m/%d/%Y %I:%M:%S %p},,1,PJM-RTO,,,ZONE,,{price},{price},0,0,True,1")
    path.write_text("\n".join(lines) + "\n")
    return path


def fleet_on_sites(sites: list[str]):
    """The pipeline day's hourly context of each site (all the advice needs of the warehouse here)."""
    con = duckdb.connect()
    con.execute("CREATE TABLE rpt_context_hourly (day DATE, hour_at TIMESTAMPTZ, site VARCHAR, "
                "intensity_gco2e_per_kwh DOUBLE, price_usd_per_mwh DOUBLE)")
    start = dt.datetime.combine(DAY, dt.time(), dt.timezone.utc)
    con.executemany("INSERT INTO rpt_context_hourly VALUES (?, ?, ?, ?, ?)", [
        (DAY, start + dt.timedelta(hours=h), site, 50.0 + abs(h - 13) * 5, 60.0) for site in sites for h in range(24)])
    return con


def counted(monkeypatch, name: str) -> list[tuple]:
    """The calls of day_ahead's loader `name`, each a parse of a price file or tariff."""
    calls: list[tuple] = []
    loader = getattr(day_ahead, name)

    def counting(*args, **kwargs):
        calls.append(args)
        return loader(*args, **kwargs)

    monkeypatch.setattr(day_ahead, name, counting)
    return calls


def advice_sites(con, tco: TcoSettings) -> dict:
    return build_advice(con, DAY, site="fleet", now=NOW, validity_hours=24.0, window_hours=3, tco=tco)["sites"]


def test_sites_sharing_the_fleets_day_ahead_file_read_it_once(tmp_path, monkeypatch):
    prices = day_ahead_file(tmp_path / "da.csv")
    parses = counted(monkeypatch, "load_pjm_lmp_csv")
    sites = advice_sites(fleet_on_sites(["site-a", "site-b", "site-c", "site-d"]),
                         TcoSettings(price_file=str(prices), site_prices=("site-d|flat|95|UTC",)))
    assert len(parses) == 1  # four sites, three on the file: it was parsed three times
    cheapest = [f"{NEXT_DAY.isoformat()}T0{h}:00:00Z" for h in (2, 3, 4)]
    for site in ("site-a", "site-b", "site-c"):
        assert sites[site]["cheapest_hours_utc"] == cheapest
        assert "day-ahead prices" in sites[site]["forecast_basis"]
    # the site on its own flat price is not given the file's hours
    assert "flat price" in sites["site-d"]["forecast_basis"]


def test_sites_sharing_the_fleets_tariff_read_it_once(shared_data, monkeypatch):
    parses = counted(monkeypatch, "load_urdb_tariff")
    tariff = shared_data / "prices/openei_urdb_tou_rate_virginia.json"
    sites = advice_sites(fleet_on_sites([f"site-{i}" for i in range(5)]), TcoSettings(tariff_file=str(tariff)))
    assert len(parses) == 1  # five times before
    assert len({tuple(entry["cheapest_hours_utc"]) for entry in sites.values()}) == 1
    assert all("time-of-use tariff" in entry["forecast_basis"] for entry in sites.values())


def test_the_same_tariff_in_two_time_zones_is_two_sources(shared_data):
    """Sites whose entries name one tariff file in different zones keep their own wall-clock hours
    (a cache by file alone would give both New York's)."""
    tariff = shared_data / "prices/openei_urdb_tou_rate_virginia.json"
    entries = (f"site-0|tariff|{tariff}|America/New_York", f"site-1|tariff|{tariff}|America/Los_Angeles")
    sites = advice_sites(fleet_on_sites(["site-0", "site-1"]), TcoSettings(site_prices=entries))
    assert sites["site-0"]["cheapest_hours_utc"] != sites["site-1"]["cheapest_hours_utc"]
