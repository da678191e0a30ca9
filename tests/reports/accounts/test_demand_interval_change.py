"""A month's days compare their demand peaks: days taken at different intervals compare a
15-minute peak with hourly ones, and the month's charges add up to neither bill. Each row of
rpt_demand_peak_daily says its interval, and a day whose month holds earlier days at another one
says so (the charge still compares with them: the only peaks the month has)."""

from __future__ import annotations

import datetime as dt

import pytest

from accounting_world import DAY, build_world
from demand_meter import add_meter, copy_gpu_hours, spike
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.settings import TcoSettings

RATE = 15.0  # USD/kW-month
LATER = DAY + dt.timedelta(days=1)


def two_days_with_quarter_hour_spikes():
    """Both days 3 kW but for 09:15-09:30: 9 kW on DAY (4.6 kW over its hour), 6 kW on LATER
    (3.75 kW over its hour)."""
    con = build_world()
    copy_gpu_hours(con, LATER)
    add_meter(con, spike(3000.0, 9000.0, 9.25, 9.5))
    add_meter(con, spike(3000.0, 6000.0, 9.25, 9.5, LATER), day=LATER)
    return con


def interval_notes(notes: list[str]) -> list[str]:
    return [n for n in notes if "demand interval" in n]


def test_a_month_accounted_at_two_intervals_says_which_days_and_records_each_rows_interval():
    con = two_days_with_quarter_hour_spikes()
    tco_day(con, DAY, TcoSettings(demand_charge_usd_per_kw_month=RATE, demand_interval_minutes=60), None)
    summary = tco_day(con, LATER, TcoSettings(demand_charge_usd_per_kw_month=RATE), None)
    rows = con.execute("SELECT day, demand_interval_minutes, peak_kw, demand_charge_usd FROM rpt_demand_peak_daily "
                       "ORDER BY day").fetchall()
    # 69 + 21 = 90 USD: neither the 15-minute bill (9 kW: 135) nor the hourly one (4.6 kW: 69)
    assert rows == [(DAY, 60, pytest.approx(4.6), pytest.approx(69.0)),
                    (LATER, 15, pytest.approx(6.0), pytest.approx(RATE * (6.0 - 4.6)))]
    [note] = interval_notes(summary.notes)
    assert str(DAY) in note and "60-minute" in note and "15-minute" in note


def test_a_month_at_one_interval_says_nothing_of_intervals():
    con = two_days_with_quarter_hour_spikes()
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    tco_day(con, DAY, settings, None)
    summary = tco_day(con, LATER, settings, None)
    assert interval_notes(summary.notes) == []
    charges = con.execute("SELECT demand_charge_usd FROM rpt_demand_peak_daily ORDER BY day").fetchall()
    assert [c for c, in charges] == pytest.approx([RATE * 9.0, 0.0]), "the month's 15-minute bill"


def test_rows_written_before_the_interval_was_kept_are_named_as_of_an_unknown_interval():
    con = two_days_with_quarter_hour_spikes()
    settings = TcoSettings(demand_charge_usd_per_kw_month=RATE)
    tco_day(con, DAY, settings, None)
    con.execute("UPDATE rpt_demand_peak_daily SET demand_interval_minutes = NULL")
    [note] = interval_notes(tco_day(con, LATER, settings, None).notes)
    assert str(DAY) in note and "not recorded" in note
