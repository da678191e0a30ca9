"""The planning estimate charges the demand charge by the accounts' own rule (one function,
reports.accounts.demand.allocated_demand_charge): for the same hourly power, `tco estimate` says
what the daily accounts charge. Before, the estimate spread rate x peak over time (hours / 730), so
a 3-day run was charged 7.40 USD where the accounts charge 150 USD (the peak set in two months)."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import pytest

from joulehouse.reports.accounts.estimate import RunShape, estimate_cost, hourly_mean
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.settings import TcoSettings

UTC = dt.timezone.utc
RATE = 15.0  # USD per kW-month
GPUS, POWER_W, PUE = 8, 500.0, 1.25  # 5 kW at the meter


def metered_run(start: dt.datetime, hours: int) -> duckdb.DuckDBPyConnection:
    """A warehouse of 8 GPUs drawing 500 W every hour from `start`, PUE 1.25, no facility meter."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE fct_gpu_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, gpu_uuid VARCHAR, "
                "gpu_model VARCHAR, energy_kwh DOUBLE, avg_power_w DOUBLE, coverage_ratio DOUBLE, energy_source VARCHAR)")
    con.execute("CREATE TABLE fct_pue_hourly (hour_at TIMESTAMPTZ, site VARCHAR, pue DOUBLE, it_energy_kwh DOUBLE, "
                "facility_energy_kwh DOUBLE, coverage_ratio DOUBLE)")
    hours = [start + dt.timedelta(hours=h) for h in range(hours)]
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'n1', ?, 'NVIDIA H100 80GB HBM3', ?, ?, 1.0, 'counter')",
                    [(h, h.date(), f"GPU-{g}", POWER_W / 1000, POWER_W) for h in hours for g in range(GPUS)])
    con.executemany("INSERT INTO fct_pue_hourly VALUES (?, 'site-a', ?, NULL, NULL, NULL)", [(h, PUE) for h in hours])
    return con


def estimated(start: dt.datetime | None, hours: float, timezone: str = "UTC") -> float:
    run = RunShape(gpu_hours=GPUS * hours, avg_power_w=POWER_W, pue=PUE, gpus=GPUS, hours=hours)
    return estimate_cost(run, 80.0, RATE, 30000.0, 60000.0, 8, 5.0, 0.1, "flat", start=start,
                         timezone=timezone)["demand_charge_usd"]


def test_the_months_billed_are_the_tariffs_local_ones_in_the_estimate_and_the_accounts():
    """22:00-02:00 UTC across 31 March is 18:00-22:00 on 31 March in New York: one March bill there,
    where UTC months charged the peak twice (March and April)."""
    start = dt.datetime(2026, 3, 31, 22, tzinfo=UTC)
    con = metered_run(start, 4)
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE, tariff_timezone="America/New_York")
    for day in (start.date(), start.date() + dt.timedelta(days=1)):
        tco_day(con, day, settings, None)
    one_bill = RATE * GPUS * POWER_W / 1000 * PUE
    assert con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily").fetchone()[0] == pytest.approx(one_bill)
    assert estimated(start, 4.0, "America/New_York") == pytest.approx(one_bill)
    assert estimated(start, 4.0) == pytest.approx(2 * one_bill)  # a tariff in UTC bills UTC months


@pytest.mark.parametrize("start, days", [
    (dt.datetime(2026, 3, 30, tzinfo=UTC), 3),  # 30 Mar - 1 Apr: the peak is billed in March and in April
    (dt.datetime(2026, 3, 2, tzinfo=UTC), 2),   # within one month: billed once
])
def test_an_estimate_charges_what_the_accounts_charge_for_the_same_hourly_power(start, days):
    con = metered_run(start, 24 * days)
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    for k in range(days):  # the accounts, a day at a time in date order, as the daily DAG runs them
        tco_day(con, start.date() + dt.timedelta(days=k), settings, None)
    accounts_usd = con.execute("SELECT sum(demand_charge_usd) FROM rpt_tco_daily").fetchone()[0]
    months = len({(start + dt.timedelta(days=k)).month for k in range(days)})
    assert accounts_usd == pytest.approx(RATE * GPUS * POWER_W / 1000 * PUE * months, rel=1e-12)
    assert estimated(start, 24.0 * days) == pytest.approx(accounts_usd, rel=1e-12)


def test_a_part_hour_is_an_hourly_average_as_the_accounts_take_it():
    # half an hour at 5 kW is 2.5 kWh in that hour: the accounts' hourly demand is 2.5 kW
    assert estimated(dt.datetime(2026, 3, 2, 10, tzinfo=UTC), 0.5) == pytest.approx(RATE * 2.5)
    # from 10:30 for an hour: two half hours, 2.5 kW each
    assert estimated(dt.datetime(2026, 3, 2, 10, 30, tzinfo=UTC), 1.0) == pytest.approx(RATE * 2.5)


def test_without_a_start_a_month_long_run_is_one_bill():
    assert estimated(None, 730.0) == pytest.approx(RATE * 5.0)
    assert estimated(None, 24.0) == pytest.approx(RATE * 5.0)


@pytest.mark.parametrize("start, hours, expected", [
    (dt.datetime(2025, 5, 1, 10, 30, tzinfo=UTC), 1.0, (0.5 * 100 + 0.5 * 500) / 1.0),  # half of 10:00, half of 11:00
    (dt.datetime(2025, 5, 1, 10, 0, tzinfo=UTC), 1.5, (1.0 * 100 + 0.5 * 500) / 1.5),
    (dt.datetime(2025, 5, 1, 9, 45, tzinfo=UTC), 2.5, (0.25 * 100 + 1.0 * 100 + 1.0 * 500 + 0.25 * 100) / 2.5),
])
def test_a_runs_grid_or_price_weighs_each_hour_by_the_time_the_run_spends_there(start, hours, expected):
    """The mean took every touched hour at full weight from the start's hour: a run from 10:30 for an
    hour read 100 g/kWh (hour 10 alone) where it spent half its time at 500."""
    series = pl.DataFrame({"hour_at": [dt.datetime(2025, 5, 1, h, tzinfo=UTC) for h in range(24)],
                           "intensity_gco2e_per_kwh": [500.0 if h == 11 else 100.0 for h in range(24)]},
                          schema_overrides={"hour_at": pl.Datetime("us", "UTC")})
    mean, counts = hourly_mean(series, "intensity_gco2e_per_kwh", start, hours, 0.0)
    assert mean == pytest.approx(expected, rel=1e-12) and counts["exact"] == int(-(-(start.minute / 60 + hours) // 1))


def test_gpu_hours_alone_leave_the_demand_charge_and_total_unknown_not_one_gpus_peak():
    """192 GPU-hours may be 8 GPUs for a day or 1 for 8 days: the peak was taken as one GPU's, so
    the charge came out 8x low with nothing said (review, helper-84). With the wall-clock hours the
    GPU count follows; with neither, the charge and the total are NULL and the method says why."""
    start = dt.datetime(2026, 3, 2, tzinfo=UTC)
    known = estimated(start, 24.0)
    with_hours = RunShape(gpu_hours=GPUS * 24.0, avg_power_w=POWER_W, pue=PUE, hours=24.0)
    assert estimate_cost(with_hours, 80.0, RATE, 30000.0, 60000.0, 8, 5.0, 0.1, "flat",
                         start=start)["demand_charge_usd"] == pytest.approx(known)
    alone = estimate_cost(RunShape(gpu_hours=GPUS * 24.0, avg_power_w=POWER_W, pue=PUE), 80.0, RATE, 30000.0,
                          60000.0, 8, 5.0, 0.1, "flat", start=start)
    assert alone["demand_charge_usd"] is None and alone["total_cost_usd"] is None
    assert alone["cost_per_gpu_hour_usd"] is None and "needs --gpus or --hours" in alone["method"]
    assert alone["energy_cost_usd"] == pytest.approx(GPUS * 24 * POWER_W / 1000 * PUE * 80 / 1000)
    no_rate = estimate_cost(RunShape(gpu_hours=GPUS * 24.0, avg_power_w=POWER_W, pue=PUE), 80.0, 0.0, 30000.0,
                            60000.0, 8, 5.0, 0.1, "flat", start=start)
    assert no_rate["demand_charge_usd"] == 0.0 and no_rate["total_cost_usd"] is not None
