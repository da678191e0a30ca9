"""Capital, operations and embodied carbon amortise over calendar time in the fleet, not over the
hours a collector recorded: a GPU whose collector was down half the day is charged its whole day,
and the unread hours are counted (unmetered_gpu_hours) so the charge is never hidden."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from accounting_world import DAY, at, build_world
from joulehouse.settings import CarbonSettings, TcoSettings
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.embodied import default_gpu_embodied_kgco2e, embodied_gco2e_per_gpu_hour
from joulehouse.reports.accounts.fleet_hours import unmetered_fleet_hours
from joulehouse.reports.accounts.tco import tco_day

TCO = TcoSettings()
CARBON = CarbonSettings()
# the accounting world's two GPUs, per hour: the A100 at its inventory price and life (4 years), the
# H100 at the settings' defaults (5 years)
A100_USD_H = (15000 + TCO.server_capex_usd / 8) / (4 * 8760)
H100_USD_H = (TCO.gpu_capex_usd + TCO.server_capex_usd / 8) / (5 * 8760)
A100_G_H = embodied_gco2e_per_gpu_hour(143, CARBON.embodied_kgco2e_per_server, 8, 4)
H100_G_H = embodied_gco2e_per_gpu_hour(default_gpu_embodied_kgco2e("NVIDIA H100 80GB HBM3", 0.0),
                                       CARBON.embodied_kgco2e_per_server, 8, 5)


def rpt(con, table: str, sql: str):
    return con.execute(f"SELECT {sql} FROM {table} WHERE day = ?", [DAY]).fetchone()


def test_a_gpu_whose_collector_was_down_half_the_day_pays_its_whole_day(shared_data):
    con = build_world()
    # the A100's collector died at noon: no row for hours 12-23
    con.execute("DELETE FROM fct_gpu_energy_hourly WHERE gpu_uuid = 'GPU-a100' AND hour_at >= ?", [at(12)])
    metered_kwh = con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly").fetchone()[0]
    cost = tco_day(con, DAY, TCO, shared_data)
    carbon = carbon_day(con, DAY, CARBON, shared_data)
    # the owner paid for, and the GPU aged, all 24 hours of both GPUs
    assert cost.components_usd["capital_usd"] == pytest.approx(24 * (A100_USD_H + H100_USD_H), rel=1e-12)
    assert cost.components_usd["operations_usd"] == pytest.approx(
        24 * 0.1 * (A100_USD_H * 4 + H100_USD_H * 5), rel=1e-12)
    assert carbon.embodied_gco2e == pytest.approx(24 * (A100_G_H + H100_G_H), rel=1e-12)
    # ... but energy is what was read, no more: nothing is made up for the lost hours
    assert carbon.energy_kwh == pytest.approx(metered_kwh, rel=1e-12)
    assert cost.energy_kwh == pytest.approx(metered_kwh, rel=1e-12)
    # and the report says how many GPU-hours were charged without a reading
    assert cost.unmetered_gpu_hours == 12 and carbon.unmetered_gpu_hours == 12
    assert rpt(con, "rpt_tco_daily", "sum(unmetered_gpu_hours), sum(gpu_hours)") == pytest.approx((12, 48))
    assert rpt(con, "rpt_carbon_daily", "sum(unmetered_gpu_hours), sum(gpu_hours)") == pytest.approx((12, 48))
    # the monthly roll-ups carry them too (a month's unread hours are not only in the daily rows)
    for view in ("rpt_tco_monthly", "rpt_carbon_monthly"):
        month = con.execute(f"SELECT sum(unmetered_gpu_hours), sum(gpu_hours) FROM {view}").fetchone()
        assert month == pytest.approx((12, 48)), view
    # no job held the A100 after noon: the idle line pays those hours, energy NULL -> 0 kWh on it
    idle = rpt(con, "rpt_tco_daily", "sum(unmetered_gpu_hours) FILTER (WHERE job_id = 'unallocated')")
    assert idle == (pytest.approx(12),)
    assert any("12 GPU-hours of GPUs in the fleet had no reading" in n for n in cost.notes)
    # the split by GPU model carries the same embodied carbon and cost
    by_gpu = con.execute("SELECT sum(embodied_gco2e) FROM rpt_carbon_by_gpu_daily WHERE gpu_model LIKE '%A100%'"
                         ).fetchone()[0]
    assert by_gpu == pytest.approx(24 * A100_G_H, rel=1e-12)


def test_a_job_that_held_an_unread_hour_pays_its_capital(shared_data):
    con = build_world()
    # train-1 held the A100 from 01:30 to 05:00; hour 02:00 was not read
    con.execute("DELETE FROM fct_gpu_energy_hourly WHERE gpu_uuid = 'GPU-a100' AND hour_at = ?", [at(2)])
    tco_day(con, DAY, TCO, shared_data)
    held = rpt(con, "rpt_tco_daily", "sum(unmetered_gpu_hours), sum(capital_usd) FILTER (WHERE job_id = 'train-1')")
    assert held[0] == pytest.approx(1.0)
    # 1.5 read hours + the unread one (03:00-05:00 shared with eval-1 from 04:00: half of 04:00)
    assert held[1] == pytest.approx((0.5 + 1 + 1 + 0.5) * A100_USD_H, rel=1e-12)


def test_the_fleet_is_the_inventory_from_purchase_on_plus_what_was_read():
    day = DAY
    metered = pl.DataFrame({"hour_at": [at(h) for h in range(20)], "gpu_uuid": ["seen-only"] * 20,
                            "host": ["n2"] * 20, "gpu_model": ["X"] * 20},
                           schema_overrides={"hour_at": pl.Datetime("us", "UTC")})
    inventory = pl.DataFrame({
        "gpu_uuid": ["listed-never-read", "bought-tomorrow", "bought-today", "stale-seen-before", "no-date",
                     "retired-today", "retires-tomorrow"],
        "host": ["n1"] * 7, "gpu_model": ["A"] * 7,
        "in_inventory": [True, True, True, False, None, True, True],
        "purchased_on": [dt.date(2025, 1, 1), day + dt.timedelta(days=1), day, None, None, dt.date(2024, 1, 1),
                         dt.date(2024, 1, 1)],
        "retired_on": [None, None, None, None, None, day, day + dt.timedelta(days=1)],
    })
    out = unmetered_fleet_hours(metered, inventory, day)
    counts = dict(out.group_by("gpu_uuid").len().iter_rows())
    # a listed GPU is owned all day from its purchase day on; one outside the inventory exists
    # on the days it was read (its 4 unread hours); one neither listed nor read that day is not charged
    # ... until the day before it is retired (sold, scrapped: its row stays for the past days' re-runs)
    assert counts == {"listed-never-read": 24, "bought-today": 24, "no-date": 24, "seen-only": 4,
                      "retires-tomorrow": 24}
    assert out.filter(pl.col("gpu_uuid") == "seen-only")["hour_at"].to_list() == [at(h) for h in range(20, 24)]
    assert set(out["day"].to_list()) == {day}


def test_a_retired_gpu_is_charged_nothing_from_its_retirement_day(shared_data):
    """A GPU sold at the end of the day before: the inventory keeps its row (for the past days'
    re-runs) with retired_on; without the date, every later day charged it 24 unread GPU-hours."""
    con = build_world()
    con.execute("DELETE FROM fct_gpu_energy_hourly WHERE gpu_uuid = 'GPU-a100'")
    charged = tco_day(con, DAY, TCO, shared_data)
    assert charged.unmetered_gpu_hours == 24
    con.execute("ALTER TABLE dim_gpu ADD COLUMN retired_on DATE")
    con.execute("UPDATE dim_gpu SET retired_on = ? WHERE gpu_uuid = 'GPU-a100'", [DAY])
    cost = tco_day(con, DAY, TCO, shared_data)
    carbon = carbon_day(con, DAY, CARBON, shared_data)
    assert cost.unmetered_gpu_hours == 0 and carbon.unmetered_gpu_hours == 0
    assert cost.components_usd["capital_usd"] == pytest.approx(24 * H100_USD_H, rel=1e-12)
    assert carbon.embodied_gco2e == pytest.approx(24 * H100_G_H, rel=1e-12)
