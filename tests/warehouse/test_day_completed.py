"""fct_warehouse_build_daily.completed_at: which days are whole for readers.

Each step of the daily run publishes whole, but between the build and the report a day's energy
is the new build's while its fits and recommendations are not yet: a reader who wants whole days
only needs a mark that the last step sets and a rebuild takes back.
"""

from __future__ import annotations

import datetime as dt

from joulehouse.collectors.sim import simulate_fleet
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day, mark_day_completed
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 3, 1)
NOW = dt.datetime(2026, 3, 5, tzinfo=dt.timezone.utc)
DONE = dt.datetime(2026, 3, 2, 6, 30, tzinfo=dt.timezone.utc)


def _completed(con) -> dict:
    return dict(con.execute("SELECT day, completed_at FROM fct_warehouse_build_daily").fetchall())


def test_a_day_is_whole_from_its_last_step_until_it_is_built_again(tmp_path):
    summary = simulate_fleet(tmp_path / "lake", gpus=1, days=2, start=DAY, seed=2, interval_s=60)
    con = connect(tmp_path / "w.duckdb", tmp_path / "lake")
    ws = WarehouseSettings(inventory_path=str(summary.inventory_path))
    assert not mark_day_completed(con, DAY), "nothing built: nothing to mark"
    build_day(con, DAY, ws, now=NOW)
    build_day(con, DAY + dt.timedelta(days=1), ws, now=NOW)
    assert _completed(con) == {DAY: None, DAY + dt.timedelta(days=1): None}, "built, not yet whole"

    assert mark_day_completed(con, DAY, DONE)
    assert _completed(con) == {DAY: DONE, DAY + dt.timedelta(days=1): None}, "only that day"

    build_day(con, DAY, ws, now=NOW)  # a re-run of the day starts it over
    assert _completed(con)[DAY] is None


def test_a_warehouse_built_before_the_mark_existed_takes_it(tmp_path):
    summary = simulate_fleet(tmp_path / "lake", gpus=1, days=1, start=DAY, seed=2, interval_s=60)
    con = connect(tmp_path / "w.duckdb", tmp_path / "lake")
    ws = WarehouseSettings(inventory_path=str(summary.inventory_path))
    build_day(con, DAY, ws, now=NOW)
    con.execute("ALTER TABLE fct_warehouse_build_daily DROP COLUMN completed_at")  # as an older version left it
    assert mark_day_completed(con, DAY, DONE)
    assert _completed(con) == {DAY: DONE}
    build_day(con, DAY, ws, now=NOW)
    assert _completed(con) == {DAY: None}
