"""The environment variables the DAG files read at parse time. A wrong one made the DAG file fail
to import with `invalid literal for int() with base 10: 'two'` (or a fromisoformat message) and no
name: the scheduler dropped the DAG and the error did not say which variable to fix."""

from __future__ import annotations

import datetime as dt

import pytest

from joulehouse.dags import dag_env


@pytest.mark.parametrize("raw", ["two", "-1", "11", "2.5"])
def test_wrong_retries_name_the_variable_and_its_range(monkeypatch, raw):
    monkeypatch.setenv("JOULEHOUSE_DAG_RETRIES", raw)
    with pytest.raises(ValueError, match=r"^JOULEHOUSE_DAG_RETRIES=.*whole number from 0 to 10"):
        dag_env.retries(default=2)


def test_retries_default_when_unset_and_the_value_when_set(monkeypatch):
    monkeypatch.delenv("JOULEHOUSE_DAG_RETRIES", raising=False)
    assert dag_env.retries(default=3) == 3
    monkeypatch.setenv("JOULEHOUSE_DAG_RETRIES", " 0 ")
    assert dag_env.retries(default=3) == 0


@pytest.mark.parametrize(("raw", "expected"), [
    ("2026-06-01", dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)),
    ("2026-06-01T00:00", dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)),
    ("2026-06-01T02:00+02:00", dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)),
])
def test_start_date_is_utc(monkeypatch, raw, expected):
    monkeypatch.setenv("JOULEHOUSE_START_DATE", raw)
    assert dag_env.start_date(default=dt.date(2026, 1, 1)) == expected


def test_a_wrong_start_date_names_the_variable(monkeypatch):
    monkeypatch.setenv("JOULEHOUSE_START_DATE", "June 1st")
    with pytest.raises(ValueError, match=r"^JOULEHOUSE_START_DATE='June 1st': must be a day"):
        dag_env.start_date(default=dt.date(2026, 1, 1))


def test_catchup_only_from_a_start_date_someone_named(monkeypatch):
    # the default start date lies long past: catching up from it walked every day since (each
    # empty, each a failed run) before a fresh deployment reached yesterday
    monkeypatch.delenv("JOULEHOUSE_START_DATE", raising=False)
    assert dag_env.catchup() is False
    monkeypatch.setenv("JOULEHOUSE_START_DATE", "  ")
    assert dag_env.catchup() is False
    monkeypatch.setenv("JOULEHOUSE_START_DATE", "2026-06-01")
    assert dag_env.catchup() is True
