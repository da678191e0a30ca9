"""Replacing a day's rows: other days untouched, empty input allowed, all-or-nothing."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.warehouse.day_tables import replace_day_rows

D1, D2 = dt.date(2026, 1, 1), dt.date(2026, 1, 2)


def test_replace_keeps_other_days_allows_empty_and_rolls_back():
    con = duckdb.connect()
    con.execute("CREATE TABLE a (day DATE, x INTEGER)")
    con.execute("CREATE TABLE b (day DATE, y INTEGER NOT NULL)")
    replace_day_rows(con, D1, {"a": (["day", "x"], [[D1, 1], [D1, 2]])})
    replace_day_rows(con, D2, {"a": (["day", "x"], [[D2, 9]])})
    replace_day_rows(con, D1, {"a": (["day", "x"], [[D1, 3]])})
    assert con.execute("SELECT day, x FROM a ORDER BY ALL").fetchall() == [(D1, 3), (D2, 9)]

    replace_day_rows(con, D1, {"a": (["day", "x"], [])})
    assert con.execute("SELECT count(*) FROM a WHERE day = ?", [D1]).fetchone()[0] == 0

    with pytest.raises(duckdb.ConstraintException):
        replace_day_rows(con, D2, {"a": (["day", "x"], [[D2, 5]]), "b": (["day", "y"], [[D2, None]])})
    assert con.execute("SELECT x FROM a WHERE day = ?", [D2]).fetchall() == [(9,)], "all or nothing"
