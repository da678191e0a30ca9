"""A day built after later days (a backfill, or days run out of order) says so: the later days'
models, recommendations, exports and demand charges did not see it. Before, the accounts' note
about the month's demand charge was computed and dropped, and nothing said the rest."""

from __future__ import annotations

import datetime as dt
import logging

import pyarrow as pa

from joulehouse import daily, daily_order
from joulehouse.collectors.writer import write_dataset
from joulehouse.settings import LakeSettings, Settings, TcoSettings, WarehouseSettings, settings_to_toml

DAY = dt.date(2026, 4, 1)
START = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)


def _site(tmp_path) -> str:
    rows = [dict(sampled_at=START + dt.timedelta(days=d, seconds=s), host="node-01", gpu_index=0, gpu_uuid="GPU-1",
                 gpu_model="NVIDIA H100 80GB HBM3", power_w=250.0 + s % 7 + 50 * d, power_limit_w=700.0, source="nvml")
            for d in range(3) for s in range(0, 7200, 10)]
    write_dataset(tmp_path / "lake", "gpu_samples", pa.Table.from_pylist(rows))
    config = tmp_path / "joulehouse.toml"
    config.write_text(settings_to_toml(Settings(
        lake=LakeSettings(path=str(tmp_path / "lake")),
        warehouse=WarehouseSettings(db_path=str(tmp_path / "warehouse.duckdb"), compact_lake=False),
        tco=TcoSettings(demand_charge_usd_per_kw_month=10.0))))
    return str(config)


def test_a_day_built_after_later_days_says_which_and_its_accounts_notes_are_kept(tmp_path, caplog):
    config = _site(tmp_path)
    later = [DAY + dt.timedelta(days=2), DAY + dt.timedelta(days=1)]
    for day in later:
        assert daily.build_warehouse(day.isoformat(), config)["later_days_built"] == [
            d.isoformat() for d in sorted(later) if d > day]
        daily.account_carbon_and_cost(day.isoformat(), config)
    with caplog.at_level(logging.WARNING, logger="joulehouse.daily"):
        built = daily.build_warehouse(DAY.isoformat(), config)
        accounted = daily.account_carbon_and_cost(DAY.isoformat(), config)
    assert built["later_days_built"] == ["2026-04-02", "2026-04-03"]
    said = [r.getMessage() for r in caplog.records]
    assert any("2026-04-01 was built after 2 later day(s) (2026-04-02 to 2026-04-03)" in m
               and "joulehouse run --date 2026-04-02 --through 2026-04-03" in m for m in said), said
    month_note = [n for n in accounted["cost"]["notes"] if "later day(s) of this month were accounted" in n]
    assert month_note and any(month_note[0] in m for m in said)


def test_a_lake_file_landing_after_its_day_was_built_is_said_with_the_rebuild_that_takes_it_in(tmp_path):
    """The gate stores a 'rebuild' result for a built day whose lake files changed, but the day's
    task returned counts only: `joulehouse run` of the next day printed success and nothing of it."""
    config = _site(tmp_path)
    daily.build_warehouse(DAY.isoformat(), config)
    assert daily.check_data(DAY.isoformat(), config)["days_to_rebuild"] == []
    late = [dict(sampled_at=START + dt.timedelta(seconds=s), host="node-02", gpu_index=0, gpu_uuid="GPU-2",
                 gpu_model="NVIDIA H100 80GB HBM3", power_w=300.0, power_limit_w=700.0, source="nvml")
            for s in range(0, 3600, 10)]
    write_dataset(tmp_path / "lake", "gpu_samples", pa.Table.from_pylist(late))  # node-02 ships a day late
    next_day = DAY + dt.timedelta(days=1)
    daily.build_warehouse(next_day.isoformat(), config)
    checked = daily.check_data(next_day.isoformat(), config)
    assert checked["failed_blocking"] == 0 and checked["days_to_rebuild"] == ["2026-04-01"]
    [said] = daily_order.day_warnings(next_day, {"check_data": checked})
    assert said.startswith("lake files of 2026-04-01 came, went or changed since it was built")
    assert said.endswith("joulehouse run --date 2026-04-01")
    daily.build_warehouse(DAY.isoformat(), config)  # the rebuild takes node-02 in
    assert daily.check_data(DAY.isoformat(), config)["days_to_rebuild"] == []


def test_a_day_built_before_the_earlier_days_the_lake_holds_says_which_and_how_to_build_them(tmp_path):
    """Day 3 built first fits, measures outcomes and charges the month without days 1 and 2 the lake
    holds; before, its run said nothing (only day 1's later build asked to restate day 3)."""
    config = _site(tmp_path)
    last = DAY + dt.timedelta(days=2)
    built = daily.build_warehouse(last.isoformat(), config)
    assert built["earlier_days_not_built"] == ["2026-04-01", "2026-04-02"]
    [said] = daily_order.day_warnings(last, {"build_warehouse": built})
    assert said.startswith("2026-04-03 was built before 2 earlier day(s) the lake holds readings for "
                           "(2026-04-01 to 2026-04-02), which this warehouse has not built")
    assert "a 28-day window" in said and said.endswith("joulehouse run --date 2026-04-01 --through 2026-04-03")
    # built in date order as it says, no day is missing any more
    assert [daily.build_warehouse(d.isoformat(), config)["earlier_days_not_built"]
            for d in (DAY, DAY + dt.timedelta(days=1), last)] == [[], [], []]
