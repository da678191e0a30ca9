"""A GPU-hour whose energy was not measured (fct_gpu_energy_hourly.energy_kwh NULL: readings too
sparse to bridge) is unknown in the accounts, never 0 kWh / 0 g / $0: a job none of whose hours was
measured has NULL energy, carbon and energy cost; a job with some measured hours is charged what
was measured and its other hours count in unmetered_gpu_hours; the jobs' energies still add up to
the measured energy, and a demand charge the meter recorded is allocated in full."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accounting_world import DAY, at, build_world
from joulehouse.reports.accounts.attribution import UNALLOCATED, attribute_gpu_hours, group_by_job, spread_unallocated
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.demand import allocate
from joulehouse.reports.accounts.tco import cost_per_gpu_hour, tco_day
from joulehouse.settings import CarbonSettings, TcoSettings

RATE = 15.0  # $/kW-month
T0 = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)


def unmeasure(con, where: str) -> None:
    con.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = NULL, avg_power_w = NULL, coverage_ratio = 0 "
                f"WHERE {where}")


def world_with_unknown_hours():
    """accounting_world with the H100's 02:00-05:00 and both GPUs' 23:00 not measured: prep-1
    (H100, 03:00-06:00) has no measured hour, serve-1 (H100, until 03:00) misses 02:00."""
    con = build_world()
    unmeasure(con, "gpu_uuid = 'GPU-h100' AND hour(hour_at) BETWEEN 2 AND 5")
    unmeasure(con, "hour(hour_at) = 23")
    return con


def row(con, table: str, job_id: str, cols: str):
    return con.execute(f"SELECT {cols} FROM {table} WHERE job_id = ?", [job_id]).fetchone()


def measured_kwh(con) -> float:
    return con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly").fetchone()[0]


def test_a_job_without_a_measured_hour_has_no_energy_carbon_or_cost_not_zero(shared_data):
    con = world_with_unknown_hours()
    carbon_day(con, DAY, CarbonSettings(), shared_data)
    # renewables at or above a 0% threshold every hour: no green premium on a known energy cost
    tco_day(con, DAY, TcoSettings(green_premium_below_renewable_pct=0.0), shared_data)
    energy, facility, location, market, embodied, total, unread, held = row(
        con, "rpt_carbon_daily", "prep-1", "energy_kwh, facility_energy_kwh, location_gco2e, market_gco2e, "
        "embodied_gco2e, total_gco2e, unmetered_gpu_hours, gpu_hours")
    assert (energy, facility, location, market) == (None, None, None, None)
    assert held == pytest.approx(3.0) and unread == pytest.approx(3.0), "its 3 GPU-hours, none measured"
    assert embodied > 0 and total == pytest.approx(embodied), "calendar-time carbon is still charged"
    energy, cost, premium, capital, unread = row(
        con, "rpt_tco_daily", "prep-1", "energy_kwh, energy_cost_usd, green_premium_usd, capital_usd, unmetered_gpu_hours")
    assert (energy, cost, premium) == (None, None, None)
    assert capital > 0 and unread == pytest.approx(3.0)
    by_gpu = con.execute("SELECT energy_kwh FROM rpt_carbon_by_gpu_daily WHERE job_id = 'prep-1'").fetchall()
    assert by_gpu == [(None,)]
    # a measured hour with no premium (renewables above the threshold) says 0, not NULL
    assert row(con, "rpt_tco_daily", "train-1", "green_premium_usd")[0] == 0.0
    # the month's market-based figure is not lost to a row that had no energy to price
    assert con.execute("SELECT count(*) FROM rpt_carbon_monthly WHERE market_gco2e IS NULL "
                       "AND energy_kwh IS NOT NULL").fetchone()[0] == 0


def test_a_job_with_some_measured_hours_is_charged_those_and_its_other_hours_are_counted():
    con = world_with_unknown_hours()
    carbon_day(con, DAY, CarbonSettings(), None)
    tco_day(con, DAY, TcoSettings(), None)
    h100_kwh = {0: 0.06 * 1.6, 1: 0.35 * 1.6}  # serve-1's measured hours (02:00 is not)
    for table in ("rpt_carbon_daily", "rpt_tco_daily"):
        energy, unread, held = row(con, table, "serve-1", "energy_kwh, unmetered_gpu_hours, gpu_hours")
        assert energy == pytest.approx(sum(h100_kwh.values())) and held == pytest.approx(3.0)
        assert unread == pytest.approx(1.0), f"{table}: 02:00 had no measured energy"
        got = con.execute(f"SELECT sum(energy_kwh) FROM {table}").fetchone()[0]
        assert got == pytest.approx(measured_kwh(con), rel=1e-12), f"{table}: jobs + idle = measured"
    assert row(con, "rpt_carbon_daily", "serve-1", "location_gco2e")[0] > 0
    grid = dict(con.execute("SELECT hour(hour_at), fleet_it_energy_kwh FROM rpt_context_grid_hourly").fetchall())
    assert grid[23] is None, "no GPU-hour of 23:00 was measured"
    assert grid[4] == pytest.approx(0.35), "04:00: the A100's measured energy, the H100's unknown"


def test_proportional_idle_leaves_an_unmeasured_job_unknown_and_conserves_energy():
    con = world_with_unknown_hours()
    tco_day(con, DAY, TcoSettings(idle_policy="proportional"), None)
    energy, capital = row(con, "rpt_tco_daily", "prep-1", "energy_kwh, capital_usd")
    assert energy is None and capital > 0
    total = con.execute("SELECT sum(energy_kwh) FROM rpt_tco_daily").fetchone()[0]
    assert total == pytest.approx(measured_kwh(con), rel=1e-12)
    idle = row(con, "rpt_tco_daily", UNALLOCATED, "energy_kwh")[0]
    assert idle == 0.0, "the measured idle energy moved onto the jobs that drew measured energy"


def test_a_demand_charge_whose_peak_hour_has_no_measured_energy_is_allocated_in_full():
    con = build_world()
    # the facility meter read 3.0 kW over 95% of 09:00; neither GPU's energy was measured then
    con.execute("UPDATE fct_pue_hourly SET facility_energy_kwh = 3.0 * 0.95, coverage_ratio = 0.95 WHERE hour_at = ?",
                [at(9)])
    unmeasure(con, "hour(hour_at) = 9")
    con.execute("INSERT INTO raw_jobs VALUES ('peak-1', 'node-01', 'GPU-a100', ?, ?, 'eve', 'vision', 'training', "
                "'throughput', false, NULL, NULL, NULL, NULL)", [at(9), at(9.5)])
    summary = tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    recorded = con.execute("SELECT demand_charge_usd FROM rpt_demand_peak_daily").fetchone()[0]
    assert recorded == pytest.approx(RATE * 3.0)
    allocated = con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily").fetchone()[0]
    assert allocated == pytest.approx(recorded), "the accounts carry what the bill records"
    assert summary.components_usd["demand_charge_usd"] == pytest.approx(recorded)
    # equally over the peak hour's two GPU-hours; peak-1 held the A100 for half of it
    assert row(con, "rpt_tco_daily", "peak-1", "demand_charge_usd")[0] == pytest.approx(recorded / 4)


def test_a_day_whose_demand_is_unknown_charges_no_demand_not_zero():
    """No GPU-hour measured and no facility meter: the peak table records the charge as NULL, and
    so must the accounts (0.0 was written, a day that cost nothing at the meter)."""
    con = build_world()
    con.execute("DELETE FROM fct_pue_hourly")
    unmeasure(con, "true")
    tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    assert con.execute("SELECT demand_charge_usd FROM rpt_demand_peak_daily").fetchall() == [(None,)]
    assert con.execute("SELECT count(*), count(demand_charge_usd) FROM rpt_tco_daily").fetchone()[1] == 0


def test_a_day_with_no_measured_energy_sums_to_unknown_not_zero():
    """The day's summaries (the DAG's XCom, the CLI) summed each column with polars, which adds
    nulls as 0: a day none of whose GPU-hours was measured said 0 kWh, an energy cost of $0 and
    0 gCO2e at the grid. Calendar-time amounts (capital, embodied) are still known."""
    con = build_world()
    con.execute("DELETE FROM fct_pue_hourly")
    unmeasure(con, "true")
    cost = tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    carbon = carbon_day(con, DAY, CarbonSettings(), None)
    assert (cost.energy_kwh, cost.facility_energy_kwh, cost.dynamic_energy_cost_usd) == (None, None, None)
    assert cost.components_usd["energy_cost_usd"] is None and cost.components_usd["demand_charge_usd"] is None
    assert cost.components_usd["capital_usd"] > 0 and cost.gpu_hours > 0
    assert (carbon.energy_kwh, carbon.location_gco2e, carbon.market_gco2e) == (None, None, None)
    assert carbon.embodied_gco2e > 0 and carbon.total_gco2e == pytest.approx(carbon.embodied_gco2e)


def peak_hour(energies: list[float | None]) -> pl.DataFrame:
    return pl.DataFrame({"day": [DAY] * len(energies), "site": ["s"] * len(energies),
                         "hour_at": [T0] * len(energies), "facility_energy_kwh": energies},
                        schema_overrides={"facility_energy_kwh": pl.Float64, "hour_at": pl.Datetime("us", "UTC")})


@pytest.mark.parametrize(("energies", "expected"), [
    ([None, None], [50.0, 50.0]),        # nothing measured: by GPU time, each row one GPU-hour
    ([0.0, 0.0], [50.0, 50.0]),          # nothing drawn at the meter by the GPUs: the same
    ([None, 2.0], [0.0, 100.0]),         # the measured draw is the peak's known draw
    ([1.0, 3.0], [25.0, 75.0]),          # pro rata by energy, as before
])
def test_allocate_puts_the_whole_charge_on_the_peak_hour(energies, expected):
    peaks = pl.DataFrame({"day": [DAY], "site": ["s"], "billing_month": [DAY.replace(day=1)], "peak_hour_at": [T0],
                          "demand_charge_usd": [100.0]},
                         schema_overrides={"peak_hour_at": pl.Datetime("us", "UTC")})
    out = allocate(peak_hour(energies), peaks)
    assert out["demand_charge_usd"].to_list() == pytest.approx(expected)


def test_green_premium_is_unknown_where_the_energy_cost_is():
    hours = pl.DataFrame({
        "hour_at": [T0] * 4, "day": [DAY] * 4, "site": ["s"] * 4, "gpu_uuid": ["a", "b", "c", "d"],
        "energy_kwh": [None, None, 1.0, 1.0], "pue": [1.5] * 4, "price_usd_per_kwh": [0.1] * 4,
        "renewable_pct": [80.0, 10.0, 80.0, 10.0], "purchased_on": [dt.date(2025, 1, 1)] * 4,
        "purchase_price_usd": [None] * 4, "lifetime_years": [None] * 4,
    }, schema_overrides={"hour_at": pl.Datetime("us", "UTC"), "energy_kwh": pl.Float64,
                         "purchase_price_usd": pl.Float64, "lifetime_years": pl.Float64})
    out = cost_per_gpu_hour(hours, TcoSettings(green_premium_below_renewable_pct=30.0, green_premium_ratio=0.2))
    premium = out.sort("gpu_uuid")["green_premium_usd"].to_list()
    assert premium[:2] == [None, None], "an unknown energy cost has an unknown premium, above the threshold or not"
    assert premium[2] == 0.0 and premium[3] == pytest.approx(0.2 * 1.5 * 0.1)
    assert out.sort("gpu_uuid")["unmetered_gpu_hours"].to_list() == [1.0, 1.0, 0.0, 0.0]


def gpu_hours(energies: dict[str, list[float | None]]) -> pl.DataFrame:
    rows = [(T0 + dt.timedelta(hours=h), DAY, uuid, e) for uuid, es in energies.items() for h, e in enumerate(es)]
    return pl.DataFrame(rows, schema={"hour_at": pl.Datetime("us", "UTC"), "day": pl.Date, "gpu_uuid": pl.String,
                                      "energy_kwh": pl.Float64}, orient="row")


def jobs(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        [(j, "node-01", g, T0 + dt.timedelta(hours=a), T0 + dt.timedelta(hours=b), "u", "t", "training", None)
         for j, g, a, b in rows],
        schema={"job_id": pl.String, "host": pl.String, "gpu_uuid": pl.String, "started_at": pl.Datetime("us", "UTC"),
                "ended_at": pl.Datetime("us", "UTC"), "user": pl.String, "team": pl.String, "stage": pl.String,
                "flops_total": pl.Float64}, orient="row")


@settings(max_examples=60, deadline=None)
@given(
    energies=st.lists(st.one_of(st.none(), st.floats(0, 5, allow_nan=False)), min_size=1, max_size=24),
    spans=st.lists(st.tuples(st.sampled_from(["g1", "g2"]), st.floats(-2, 26), st.floats(0.01, 10)), max_size=6),
    proportional=st.booleans(),
)
def test_jobs_sum_to_the_measured_energy_and_an_unmeasured_job_is_null(energies, spans, proportional):
    per_gpu = {"g1": energies, "g2": energies[::-1]}
    hours = gpu_hours(per_gpu)
    grouped = group_by_job(attribute_gpu_hours(hours, jobs([(f"j{i}", g, a, a + d) for i, (g, a, d) in enumerate(spans)]),
                                               ["energy_kwh"]), ["energy_kwh"])
    if proportional:
        grouped = spread_unallocated(grouped, ["energy_kwh"])
    assert (grouped["energy_kwh"].sum() or 0.0) == pytest.approx(hours["energy_kwh"].sum() or 0.0, rel=1e-9, abs=1e-9)
    day_known = any(e is not None for e in energies)
    for i, (g, a, d) in enumerate(spans):
        found = grouped.filter(pl.col("job_id") == f"j{i}")
        if not found.height:
            continue  # it held no hour of the day
        held = [per_gpu[g][h] for h in range(len(energies)) if h < a + d and h + 1 > a]
        known = any(e is not None for e in held)
        got = found["energy_kwh"][0]
        if not known and not (proportional and day_known):
            assert got is None, f"j{i} held only unmeasured hours: its energy is unknown, not {got}"
        if known:
            assert got is not None
