"""`joulehouse run`'s wrapper around the Airflow child: what it refuses before starting one."""

from __future__ import annotations

import datetime as dt

import pytest

from joulehouse.cli.dagrun import DagRunFailed, run_day


def test_a_malformed_start_date_is_one_clear_error_before_airflow_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("JOULEHOUSE_START_DATE", "June 2026")
    with pytest.raises(DagRunFailed, match=r"JOULEHOUSE_START_DATE='June 2026' is not a date"):
        run_day(dt.date(2026, 6, 10), tmp_path / "joulehouse.toml", tmp_path / "airflow")
    assert not (tmp_path / "airflow" / "airflow.db").exists(), "no Airflow run was started"
