"""Whether a day has GPU-hours to account, and what the notes say when it has few: one rule both
accounts (carbon_day, tco_day) ask the prepared day (warehouse_io.PreparedDay.has_hours_to_account),
where each had its own copy of the conditions and the notes."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from accounting_world import DAY, build_world
from joulehouse.reports.accounts.attribution import empty_jobs
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.reports.accounts.warehouse_io import DayInputs, PreparedDay
from joulehouse.settings import CarbonSettings, TcoSettings

READ_HOUR = pl.DataFrame({"gpu_uuid": ["GPU-0"], "hour_at": [dt.datetime(2026, 1, 2, 3, tzinfo=dt.timezone.utc)]})


def _prepared(unread_hours: int) -> PreparedDay:
    unread = pl.DataFrame({"gpu_uuid": ["GPU-1"] * unread_hours})
    inputs = DayInputs(day=DAY, gpu_hours=READ_HOUR.clear(), pue=pl.DataFrame(), jobs=empty_jobs(),
                       unmetered_hours=unread)
    return PreparedDay(inputs, empty_jobs(), 0, READ_HOUR.clear(), 0, [])


def test_read_hours_are_accounted_without_a_note():
    prepared = _prepared(unread_hours=3)
    assert prepared.has_hours_to_account(READ_HOUR, "capital and operations")
    assert prepared.notes == []


def test_a_day_of_unread_fleet_hours_only_is_accounted_and_says_what_they_carry():
    prepared = _prepared(unread_hours=3)
    assert prepared.has_hours_to_account(READ_HOUR.clear(), "embodied carbon")
    assert prepared.notes == [f"no metered GPU-hours on {DAY}: embodied carbon of the fleet's hours only"]


def test_a_day_without_any_hour_is_not_accounted_and_says_so():
    prepared = _prepared(unread_hours=0)
    assert not prepared.has_hours_to_account(READ_HOUR.clear(), "embodied carbon")
    assert prepared.notes == [f"no metered GPU-hours on {DAY}: nothing to account"]


@pytest.mark.parametrize("with_dim, said", [(True, "of the fleet's hours only"), (False, "nothing to account")])
def test_both_accounts_tell_a_day_without_readings_alike(shared_data, with_dim, said):
    con = build_world(with_dim=with_dim)
    try:
        empty_day = DAY + dt.timedelta(days=5)
        carbon = carbon_day(con, empty_day, CarbonSettings(), shared_data)
        cost = tco_day(con, empty_day, TcoSettings(), shared_data)
        for summary in (carbon, cost):
            told = [n for n in summary.notes if n.startswith("no metered GPU-hours")]
            assert len(told) == 1 and told[0].startswith(f"no metered GPU-hours on {empty_day}") and said in told[0]
        assert carbon.unmetered_gpu_hours == cost.unmetered_gpu_hours == (48 if with_dim else 0)
    finally:
        con.close()
