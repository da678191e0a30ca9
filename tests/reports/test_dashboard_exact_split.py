"""The dashboard's split by GPU model and site is the accounts' own, to the joule: a server whose IT
energy is its BMC's (overhead above its GPUs' board energy) keeps that overhead, and a GPU outside
the inventory on a host without a BMC (an imported nvidia-smi trace) gets exactly its own board
energy, carbon and cost, whatever the idle policy; every dimension still adds up to the accounts."""

from __future__ import annotations

import datetime as dt
import html

import polars as pl
import pytest
from accounting_world import DAY, GPUS, add_node_energy, at, build_world

import joulehouse.reports.accounts.carbon as carbon_module
import joulehouse.reports.accounts.tco as tco_module
from joulehouse.reports.dashboard.render import SQL, render_dashboard
from joulehouse.settings import CarbonSettings, TcoSettings

TRACE, RTX = "GPU-trace", "NVIDIA GeForce RTX 4090"
MONTH = DAY.replace(day=1)
METRICS = ("location_gco2e", "market_gco2e", "embodied_gco2e", "total_cost_usd", "it_energy_kwh")
CARBON_OF = {"location_gco2e": "location_gco2e", "market_gco2e": "market_gco2e", "embodied_gco2e": "embodied_gco2e",
             "it_energy_kwh": "energy_kwh"}


def world(with_jobs: bool):
    """accounting_world's node-01 (two GPUs, its BMC's energy = theirs + 0.2 kWh an hour in hours
    0-19) and a trace GPU on 'laptop', which has no BMC and is not in the inventory; no job ran on it."""
    con = build_world(with_jobs=with_jobs)
    add_node_energy(con)  # before the trace GPU: node-01's BMC reads node-01's GPUs only
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'laptop', ?, ?, ?, ?, 1.0, 'counter')",
                    [(at(h), DAY, TRACE, RTX, kwh, kwh * 1000) for h, kwh in enumerate([0.011, 0.023] * 12)])
    return con


def account(con, policy: str, shared_data, monkeypatch) -> dict[str, pl.DataFrame]:
    """carbon_day and tco_day, keeping the per-GPU-hour amounts they computed."""
    per_hour = {}

    def keep(name, fn):
        def wrapped(*args, **kwargs):
            per_hour[name] = fn(*args, **kwargs)
            return per_hour[name]
        return wrapped

    monkeypatch.setattr(carbon_module, "carbon_per_gpu_hour", keep("carbon", carbon_module.carbon_per_gpu_hour))
    monkeypatch.setattr(tco_module, "cost_per_gpu_hour", keep("cost", tco_module.cost_per_gpu_hour))
    carbon_module.carbon_day(con, DAY, CarbonSettings(idle_policy=policy), shared_data)
    tco_module.tco_day(con, DAY, TcoSettings(idle_policy=policy), shared_data)
    return per_hour


def own_amounts(per_hour: dict[str, pl.DataFrame], uuids: list[str]) -> dict[str, float | None]:
    """What the accounts computed for these GPUs' own GPU-hours."""
    carbon = per_hour["carbon"].filter(pl.col("gpu_uuid").is_in(uuids))
    cost = per_hour["cost"].filter(pl.col("gpu_uuid").is_in(uuids))
    out = {metric: float(carbon[column].sum()) for metric, column in CARBON_OF.items()}
    if per_hour["carbon"]["market_gco2e"].null_count():
        out["market_gco2e"] = None
    out["total_cost_usd"] = float(cost.select(pl.sum_horizontal(tco_module.COST_COMPONENTS)).to_series().sum())
    return out


def dashboard(con, tmp_path) -> tuple[dict, str]:
    page = html.unescape(render_dashboard(con, tmp_path / "dashboard.html").read_text())  # also makes the stand-ins
    rows = con.sql(SQL.text("dashboard_carbon_cost"), params={"period": "month"}).pl().filter(pl.col("period_start") == MONTH)
    return {(r["dimension"], r["value"]): r for r in rows.iter_rows(named=True)}, page


def assert_same(got: dict, expected: dict) -> None:
    for metric in METRICS:
        if expected[metric] is None:
            assert got[metric] is None, metric
        else:
            assert got[metric] == pytest.approx(expected[metric], rel=1e-9, abs=1e-12), metric


@pytest.mark.parametrize("policy", ["unallocated", "proportional"])
@pytest.mark.parametrize("with_jobs", [False, True])
def test_each_gpu_model_and_site_gets_exactly_its_own_accounts(shared_data, monkeypatch, tmp_path, policy, with_jobs):
    con = world(with_jobs)
    per_hour = account(con, policy, shared_data, monkeypatch)
    split, page = dashboard(con, tmp_path)

    # The trace GPU: IT energy is its board energy, and its carbon and cost are its own.
    board = con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE gpu_uuid = ?", [TRACE]).fetchall()[0][0]
    trace = own_amounts(per_hour, [TRACE])
    assert trace["it_energy_kwh"] == pytest.approx(board, rel=1e-12)
    assert_same(split[("site", "not in inventory")], trace)
    assert_same(split[("gpu_model", RTX)], trace)
    # node-01 keeps its BMC overhead: each of its models, and its site, gets its own GPU-hours' amounts.
    for uuid, model in GPUS.items():
        assert_same(split[("gpu_model", model)], own_amounts(per_hour, [uuid]))
    assert_same(split[("site", "site-a")], own_amounts(per_hour, list(GPUS)))
    assert split[("site", "site-a")]["it_energy_kwh"] > con.execute(
        "SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE host = 'node-01'").fetchall()[0][0] + 1.0

    # Conservation: every dimension adds up to the accounts' totals.
    totals = con.execute("SELECT sum(location_gco2e), sum(market_gco2e), sum(embodied_gco2e), sum(energy_kwh) "
                         "FROM rpt_carbon_daily").fetchall()[0]
    expected = dict(zip(("location_gco2e", "market_gco2e", "embodied_gco2e", "it_energy_kwh"), totals))
    expected["total_cost_usd"] = con.execute("SELECT sum(total_cost_usd) FROM rpt_tco_daily").fetchall()[0][0]
    for dimension in ("team", "gpu_model", "site"):
        rows = [r for (d, _), r in split.items() if d == dimension]
        assert_same({m: None if expected[m] is None else sum(r[m] for r in rows) for m in METRICS}, expected)
    assert not [v for (d, v) in split if d != "team" and v == "unallocated"]
    assert "Approximate split" not in page


def test_days_accounted_before_the_split_was_kept_fall_back_and_say_so(shared_data, monkeypatch, tmp_path):
    con = world(with_jobs=True)
    account(con, "unallocated", shared_data, monkeypatch)
    con.execute("DELETE FROM rpt_tco_by_gpu_daily")  # as if tco_day had run before the table was kept
    split, page = dashboard(con, tmp_path)
    assert "Approximate split by GPU model and site." in page and f"1 day(s) from {DAY} to {DAY}" in page
    # carbon still exact, cost by board energy share: the totals still add up
    total_cost = con.execute("SELECT sum(total_cost_usd) FROM rpt_tco_daily").fetchall()[0][0]
    assert sum(r["total_cost_usd"] for (d, _), r in split.items() if d == "site") == pytest.approx(total_cost, rel=1e-9)
    con.execute("DROP TABLE rpt_carbon_by_gpu_daily")
    con.execute("DROP TABLE rpt_tco_by_gpu_daily")
    split, page = dashboard(con, tmp_path)
    assert "Approximate split by GPU model and site." in page
    assert sum(r["it_energy_kwh"] for (d, _), r in split.items() if d == "gpu_model") == pytest.approx(
        con.execute("SELECT sum(energy_kwh) FROM rpt_carbon_daily").fetchall()[0][0], rel=1e-9)


def test_the_split_tables_add_up_to_the_report_rows_per_job(shared_data, monkeypatch):
    con = world(with_jobs=True)
    account(con, "proportional", shared_data, monkeypatch)
    for report, by_gpu, columns in (
            ("rpt_carbon_daily", "rpt_carbon_by_gpu_daily", ("energy_kwh", "location_gco2e", "embodied_gco2e")),
            ("rpt_tco_daily", "rpt_tco_by_gpu_daily", ("energy_kwh", "total_cost_usd"))):
        sums = ", ".join(f"sum({c})" for c in columns)
        want = {r[0]: r[1:] for r in con.execute(f"SELECT job_id, {sums} FROM {report} GROUP BY 1").fetchall()}
        got = {r[0]: r[1:] for r in con.execute(f"SELECT job_id, {sums} FROM {by_gpu} GROUP BY 1").fetchall()}
        assert set(got) <= set(want)
        for job, amounts in want.items():
            assert got.get(job, (0.0,) * len(columns)) == pytest.approx(amounts, rel=1e-9, abs=1e-12), (report, job)
