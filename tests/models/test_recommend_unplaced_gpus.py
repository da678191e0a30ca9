"""A GPU the inventory does not list, beside a fleet listed at two sites: the recommender prices it
where the cost accounts put it (reports/accounts/warehouse_io.py, fleet_hours.py): at the day's
only metered site where there is one, else at 'unknown', which beside known sites is no site, so
no demand charge is priced for it (the accounts bill 'unknown' none). The warehouse and the
accounts' hourly context are written by hand, as they write them."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.models.power import fit_day
from joulehouse.models.recommend import AT_NO_SITE_NOTE, recommend_day
from joulehouse.models.recommend_inputs import gpu_energy_prices
from joulehouse.settings import ModelSettings, RecommendSettings
from power_synthetic import load_samples, synthetic_samples

DAY = dt.date(2026, 3, 2)
HOURS = [dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc) + dt.timedelta(hours=h) for h in range(24)]
# USD/MWh and PUE of each site's hours in the accounts' context; 'unknown' is at the fleet's own price source
SITE_CONTEXT = {"site-a": (120.0, 1.25), "site-b": (200.0, 1.4), "unknown": (80.0, 1.3)}
RATE_USD_PER_KW_MONTH = 15.0


def _warehouse(con, listed: dict[str, str], metered: list[str], context_sites: list[str]) -> None:
    """fct_gpu_energy_hourly (every GPU of stg_gpu_samples 0.3 kWh an hour), dim_gpu listing
    `listed` ({gpu_uuid: site}), fct_pue_hourly for the `metered` sites and rpt_context_hourly for
    `context_sites` (SITE_CONTEXT's price and PUE, 300 gCO2e/kWh)."""
    uuids = [u for (u,) in con.execute("SELECT DISTINCT gpu_uuid FROM stg_gpu_samples ORDER BY 1").fetchall()]
    con.execute("CREATE OR REPLACE TABLE fct_gpu_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, "
                "gpu_uuid VARCHAR, energy_kwh DOUBLE)")
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'node-01', ?, 0.3)",
                    [[h, DAY, u] for u in uuids for h in HOURS])
    con.execute("CREATE OR REPLACE TABLE dim_gpu (gpu_uuid VARCHAR, host VARCHAR, site VARCHAR, region VARCHAR)")
    for uuid, site in listed.items():
        con.execute("INSERT INTO dim_gpu VALUES (?, 'node-01', ?, 'FR')", [uuid, site])
    con.execute("CREATE OR REPLACE TABLE fct_pue_hourly (hour_at TIMESTAMPTZ, site VARCHAR, pue DOUBLE)")
    for site in metered:
        con.executemany("INSERT INTO fct_pue_hourly VALUES (?, ?, ?)", [[h, site, SITE_CONTEXT[site][1]] for h in HOURS])
    con.execute("CREATE OR REPLACE TABLE rpt_context_hourly (hour_at TIMESTAMPTZ, day DATE, site VARCHAR, "
                "region VARCHAR, intensity_gco2e_per_kwh DOUBLE, price_usd_per_mwh DOUBLE, pue DOUBLE)")
    con.executemany("INSERT INTO rpt_context_hourly VALUES (?, ?, ?, 'FR', 300.0, ?, ?)",
                    [[h, DAY, s, *SITE_CONTEXT[s]] for s in context_sites for h in HOURS])


def _fleet() -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    con = duckdb.connect()
    load_samples(con, synthetic_samples(seed=21, n_gpus=3, capped_limit_w=None))
    return con, [u for (u,) in con.execute("SELECT DISTINCT gpu_uuid FROM stg_gpu_samples ORDER BY 1").fetchall()]


def _recommended(con, rate_usd_per_kw_month: float) -> dict[str, dict]:
    """fct_recommendation's rows of DAY by GPU, recommended at the demand charge `rate_usd_per_kw_month`."""
    recommend_day(con, DAY, RecommendSettings(holdout_share=0.0), demand_charge_usd_per_kw_month=rate_usd_per_kw_month)
    cur = con.execute("SELECT * FROM fct_recommendation WHERE day = ?", [DAY])
    names = [d[0] for d in cur.description]
    return {r["gpu_uuid"]: r for r in (dict(zip(names, values)) for values in cur.fetchall())}


def test_an_unlisted_gpu_beside_two_listed_sites_and_one_meter_is_priced_at_the_metered_site():
    """Only site-a has a facility meter: the accounts take the unlisted GPU to be there (its price
    and PUE, 120 USD/MWh at 1.25). The recommender took the context's two sites for 'no single
    site', put it at 'unknown', which has no context, and priced it at the defaults."""
    con, (a, b, unlisted) = _fleet()
    _warehouse(con, {a: "site-a", b: "site-b"}, metered=["site-a"], context_sites=["site-a", "site-b"])
    prices = gpu_energy_prices(con, DAY)
    assert unlisted in prices, "the unlisted GPU has the hourly context of the site the accounts put it at"
    assert prices[unlisted]["price_usd_per_kwh"] == pytest.approx(0.120)
    assert prices[unlisted]["pue"] == pytest.approx(1.25)
    assert prices[b]["price_usd_per_kwh"] == pytest.approx(0.200), "a listed GPU stays at its own site"


def test_an_unlisted_gpu_beside_two_metered_sites_pays_no_demand_charge_as_in_the_accounts():
    """Both sites metered: the accounts put the unlisted GPU at 'unknown' (the fleet's price, the
    default PUE) and bill it no demand charge. The recommender priced its heaviest phase at the
    fleet's 15 USD/kW-month all the same, a saving the accounts never show; the listed GPUs keep it."""
    con, (a, b, unlisted) = _fleet()
    fit_day(con, DAY, ModelSettings())
    _warehouse(con, {a: "site-a", b: "site-b"}, metered=["site-a", "site-b"],
               context_sites=["site-a", "site-b", "unknown"])
    without_demand, charged = _recommended(con, 0.0), _recommended(con, RATE_USD_PER_KW_MONTH)
    assert (charged[unlisted]["price_usd_per_kwh"], charged[unlisted]["pue"]) == pytest.approx((0.080, 1.3))
    assert charged[unlisted]["demand_charge_usd_per_kw_month"] == 0.0
    assert AT_NO_SITE_NOTE in charged[unlisted]["reason"]
    assert charged[unlisted]["power_limit_w"] == without_demand[unlisted]["power_limit_w"]
    assert charged[unlisted]["expected_saving_pct"] == pytest.approx(without_demand[unlisted]["expected_saving_pct"])
    for listed in (a, b):
        assert charged[listed]["demand_charge_usd_per_kw_month"] == RATE_USD_PER_KW_MONTH
        assert AT_NO_SITE_NOTE not in (charged[listed]["reason"] or "")


def test_a_fleet_that_knows_no_site_is_one_site_and_its_demand_charge_is_priced():
    """No inventory site and no meter: the accounts take the fleet as one site, 'unknown', with one
    demand peak; it is a site then, and the recommender prices its demand charge."""
    con, uuids = _fleet()
    fit_day(con, DAY, ModelSettings())
    _warehouse(con, {}, metered=[], context_sites=["unknown"])
    rows = _recommended(con, RATE_USD_PER_KW_MONTH)
    assert {u: r["demand_charge_usd_per_kw_month"] for u, r in rows.items()} == dict.fromkeys(uuids, RATE_USD_PER_KW_MONTH)
    assert all(AT_NO_SITE_NOTE not in (r["reason"] or "") for r in rows.values())


def test_each_gpu_is_priced_at_its_own_regions_grid_where_an_unlisted_gpu_brings_another_to_its_site():
    """One meter at site-a: the unlisted GPU is accounted there under the fallback [carbon] region
    (DE, 450 g), beside the listed GPUs' FR rows (50 g). Matched by hour and site alone, every GPU
    of site-a read the two regions' mean, 250 g, over 48 'hours'."""
    con, (a, b, unlisted) = _fleet()
    _warehouse(con, {a: "site-a", b: "site-a"}, metered=["site-a"], context_sites=["site-a"])
    con.execute("UPDATE rpt_context_hourly SET intensity_gco2e_per_kwh = 50.0")
    con.executemany("INSERT INTO rpt_context_hourly VALUES (?, ?, 'site-a', 'DE', 450.0, ?, ?)",
                    [[h, DAY, *SITE_CONTEXT["site-a"]] for h in HOURS])
    prices = gpu_energy_prices(con, DAY)
    assert prices[a]["grid_gco2e_per_kwh"] == pytest.approx(50.0) and prices[a]["n_hours"] == 24
    assert prices[unlisted]["grid_gco2e_per_kwh"] == pytest.approx(450.0) and prices[unlisted]["n_hours"] == 24
    assert prices[b]["price_usd_per_kwh"] == pytest.approx(0.120)
