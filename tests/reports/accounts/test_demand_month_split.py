"""The UTC day that holds a billing month's turn bills its demand charge in two months; each team
(and site) is to see in each month what its own hours added to that month's peak. The monthly view
used to give every row of the day the day's share of each month, so a team that drew only after
the turn was billed part of the month before, and one that drew only before it part of the next."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting_world import build_world
from joulehouse.settings import TcoSettings
from joulehouse.reports.accounts.tco import tco_day

RATE = 15.0  # $/kW-month
MARCH, APRIL = dt.date(2026, 3, 1), dt.date(2026, 4, 1)
# (tariff zone, the UTC day of its March/April turn, vision's hour before the turn, search's after it)
NEW_YORK = ("America/New_York", dt.date(2026, 4, 1), 1, 12)  # 1 April 00:00-04:00 UTC is 31 March there
TOKYO = ("Asia/Tokyo", dt.date(2026, 3, 31), 1, 16)  # 31 March 15:00-24:00 UTC is 1 April there


def turn_day_world(turn_day: dt.date, before_hour: int, after_hour: int):
    """Two sites on the turn's UTC day: vision's job draws 2 kW at site-a for two hours from
    `before_hour` (still March locally), search's 3 kW at site-b for two hours from `after_hour`
    (April locally). Nothing else draws (0 kWh) and the PUE is 1, so each site's peak is its job's kW."""

    def at(hour: int) -> dt.datetime:
        return dt.datetime(turn_day.year, turn_day.month, turn_day.day, hour, tzinfo=dt.timezone.utc)

    con = build_world()
    for table in ("fct_gpu_energy_hourly", "fct_pue_hourly", "raw_jobs"):
        con.execute(f"DELETE FROM {table}")
    con.execute("UPDATE dim_gpu SET site = 'site-b' WHERE gpu_uuid = 'GPU-h100'")
    busy = {("GPU-a100", before_hour): 2.0, ("GPU-a100", before_hour + 1): 2.0,
            ("GPU-h100", after_hour): 3.0, ("GPU-h100", after_hour + 1): 3.0}
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, 'node-01', ?, ?, ?, ?, 1.0, 'counter')",
                    [(at(h), turn_day, uuid, model, busy.get((uuid, h), 0.0), busy.get((uuid, h), 0.0) * 1000)
                     for uuid, model in (("GPU-a100", "NVIDIA A100-SXM4-80GB"), ("GPU-h100", "NVIDIA H100 80GB HBM3"))
                     for h in range(24)])
    con.executemany("INSERT INTO fct_pue_hourly VALUES (?, ?, 1.0, NULL, NULL, NULL)",
                    [(at(h), site) for site in ("site-a", "site-b") for h in range(24)])
    con.executemany("INSERT INTO raw_jobs VALUES (?, 'node-01', ?, ?, ?, ?, ?, 'training', 'throughput', false, "
                    "NULL, NULL, NULL, NULL)",
                    [("late-march", "GPU-a100", at(before_hour), at(before_hour + 2), "ana", "vision"),
                     ("april-run", "GPU-h100", at(after_hour), at(after_hour + 2), "cy", "search")])
    return con


@pytest.mark.parametrize(("zone", "turn_day", "before_hour", "after_hour"), [NEW_YORK, TOKYO],
                         ids=["new_york", "tokyo"])
def test_each_team_is_billed_in_the_month_its_own_peak_hours_fall_in(zone, turn_day, before_hour, after_hour):
    con = turn_day_world(turn_day, before_hour, after_hour)
    tco_day(con, turn_day, TcoSettings(demand_charge_usd_per_kw_month=RATE, tariff_timezone=zone), None)
    # by hand: site-a's March peak 2 kW (vision) -> 30 USD in March, its April peak 0 kW; site-b's
    # March peak 0 kW, its April peak 3 kW (search) -> 45 USD in April
    bills = con.execute("SELECT site, billing_month, demand_charge_usd FROM rpt_demand_peak_daily "
                        "ORDER BY ALL").fetchall()
    assert bills == [("site-a", MARCH, pytest.approx(RATE * 2.0)), ("site-a", APRIL, 0.0),
                     ("site-b", MARCH, 0.0), ("site-b", APRIL, pytest.approx(RATE * 3.0))]
    monthly = {(month, team): (usd, total) for month, team, usd, total in con.execute(
        "SELECT month_start, team, sum(demand_charge_usd), sum(total_cost_usd) FROM rpt_tco_monthly "
        "GROUP BY ALL").fetchall()}
    demand = {key: usd for key, (usd, _) in monthly.items()}
    # vision ran only at site-a before the turn, search only at site-b after it: each team's month
    # is its site's bill of that month (the old view: vision 12 + 18, search 18 + 27)
    assert demand.get((MARCH, "vision")) == pytest.approx(RATE * 2.0)
    assert demand.get((APRIL, "vision"), 0.0) == pytest.approx(0.0, abs=1e-9)
    assert demand.get((MARCH, "search"), 0.0) == pytest.approx(0.0, abs=1e-9)
    assert demand.get((APRIL, "search")) == pytest.approx(RATE * 3.0)
    # a month's teams add up to the month's bill, and nothing is lost from the day's total cost
    for month in (MARCH, APRIL):
        billed = sum(usd for _, m, usd in bills if m == month)
        assert sum(usd for (m, _), usd in demand.items() if m == month) == pytest.approx(billed)
    day_total = con.execute("SELECT sum(total_cost_usd) FROM rpt_tco_daily").fetchone()[0]
    assert sum(total for _, total in monthly.values()) == pytest.approx(day_total)


def test_rows_written_before_the_split_was_kept_still_bill_each_month_in_full():
    """A turn day accounted before rpt_tco_daily kept each row's other-month part (NULL) moves the
    day's share of that month's bill: each month's total is still its bill."""
    zone, turn_day, before_hour, after_hour = NEW_YORK
    con = turn_day_world(turn_day, before_hour, after_hour)
    tco_day(con, turn_day, TcoSettings(demand_charge_usd_per_kw_month=RATE, tariff_timezone=zone), None)
    con.execute("UPDATE rpt_tco_daily SET demand_charge_other_month_usd = NULL")
    monthly = dict(con.execute("SELECT month_start, sum(demand_charge_usd) FROM rpt_tco_monthly "
                               "GROUP BY ALL").fetchall())
    assert monthly == {MARCH: pytest.approx(RATE * 2.0), APRIL: pytest.approx(RATE * 3.0)}
