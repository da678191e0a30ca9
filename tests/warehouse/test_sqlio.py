"""Replacing a day's rows: other days untouched, empty input allowed, all-or-nothing."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

import polars as pl
import pyarrow as pa

from joulehouse.warehouse.sqlio import (
    SqlFiles, quoted_relation, relation_exists, replace_day, replace_day_rows, transaction, used_parameters,
)

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


def test_replace_day_from_a_query_creates_the_table_then_replaces_only_that_day():
    con = duckdb.connect()
    query = "SELECT $day::DATE AS day, range AS x FROM range($n)"
    assert replace_day(con, "t", D1, query, {"day": D1, "n": 3}) == 3
    assert replace_day(con, "t", D2, query, {"day": D2, "n": 2}) == 2
    assert replace_day(con, "t", D1, query, {"day": D1, "n": 1}) == 1
    assert replace_day(con, "t", D1, query, {"day": D1, "n": 2}, append=True) == 3
    assert con.execute("SELECT day, count(*) FROM t GROUP BY day ORDER BY day").fetchall() == [(D1, 3), (D2, 2)]


def test_a_transaction_inside_a_callers_transaction_is_part_of_it():
    con = duckdb.connect()
    con.execute("CREATE TABLE a (day DATE, x INTEGER)")
    with pytest.raises(RuntimeError), transaction(con):
        replace_day_rows(con, D1, {"a": (["day", "x"], [[D1, 1]])})  # its own transaction joins the outer one
        raise RuntimeError("a later step fails")
    assert con.execute("SELECT count(*) FROM a").fetchone()[0] == 0, "the inner write is rolled back with the outer"


def test_rows_as_dicts_or_frames_insert_by_column_name():
    con = duckdb.connect()
    con.execute("CREATE TABLE a (day DATE, x INTEGER, note VARCHAR)")
    replace_day_rows(con, D1, {"a": [{"day": D1, "x": 1}, {"day": D1, "note": "no x", "x": None}]})
    assert con.execute("SELECT x, note FROM a ORDER BY x NULLS LAST").fetchall() == [(1, None), (None, "no x")]
    replace_day_rows(con, D2, {"a": pa.table({"note": ["arrow"], "day": [D2], "x": [7]})})
    replace_day_rows(con, D2, {"a": pl.DataFrame({"x": [8], "day": [D2]})})
    assert con.execute("SELECT x, note FROM a WHERE day = ?", [D2]).fetchall() == [(8, None)]


def test_used_parameters_come_from_duckdbs_parser():
    sql = "SELECT '$not_one -- nor this' AS a, $Day, $day, $limit_w -- $comment\n FROM t WHERE x = $other"
    assert used_parameters(sql) == ["day", "limit_w", "other"]
    assert used_parameters("SELECT 1; SELECT $b; SELECT $a") == ["a", "b"]


def test_relation_exists_tells_tables_views_and_temporary_ones_apart():
    con = duckdb.connect()
    con.execute("CREATE TABLE kept (x INTEGER)")
    con.execute("CREATE TEMP TABLE scratch (x INTEGER)")
    con.execute("CREATE VIEW seen AS SELECT 1")
    assert relation_exists(con, "kept") and relation_exists(con, "seen") and relation_exists(con, "scratch")
    assert not relation_exists(con, "scratch", temporary=False) and relation_exists(con, "scratch", temporary=True)
    assert relation_exists(con, "main.kept") and not relation_exists(con, "other.kept")
    assert not relation_exists(con, "missing")


def test_sql_files_name_the_file_and_the_choices_when_one_is_missing():
    files = SqlFiles("joulehouse.warehouse", "build_sql")
    assert "host_gpus" in files.names() and "SELECT" in files.text("host_gpus").upper()
    with pytest.raises(FileNotFoundError, match=r"no SQL file .*nope\.sql \(expected one of \["):
        files.text("nope")
    with pytest.raises(ValueError, match="not a plain identifier"):
        quoted_relation("t; DROP TABLE x")


def test_replace_day_leaves_no_unfinished_result_behind():
    """DuckDB refuses register/unregister while a result is unfinished: the Spark path loads its
    frames through a registered view around replace_day."""
    con = duckdb.connect()
    con.register("computed", pa.table({"day": [D1, D1], "x": [1, 2]}))
    assert replace_day(con, "t", D1, "SELECT * FROM computed") == 2
    con.unregister("computed")
