"""Every command that takes a day refuses a bad one the same way: one line, exit 2, naming the
option and the format (they used to print three different ways, one of them a usage panel)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app


@pytest.mark.parametrize("args, option, value", [
    (["run", "--date", "2026-13-01"], "--date", "2026-13-01"),
    (["run", "--date", "2026-06-10", "--through", "June 12"], "--through", "June 12"),
    (["demo", "--start", "yesterday"], "--start", "yesterday"),
    (["simulate", "--lake", "LAKE", "--start", "yesterday"], "--start", "yesterday"),
    (["compact", "--lake", "LAKE", "--date", "2026-06-31"], "--date", "2026-06-31"),
])
def test_a_bad_day_is_one_line_naming_the_option(tmp_path, args, option, value):
    args = [str(tmp_path / "lake") if a == "LAKE" else a for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.output.strip() == f"error: {option} {value!r} is not a date (YYYY-MM-DD)"
    assert not (tmp_path / "lake").exists(), "nothing is written before the input is checked"


@pytest.mark.parametrize("args, message", [
    # OverflowError and a traceback, in simulate's case after the first day was written
    (["run", "--date", "9999-12-31"], "error: --date 9999-12-31: expected a day from 1970-01-01 to 9998-12-31"),
    (["simulate", "--lake", "LAKE", "--start", "0001-01-01"],
     "error: --start 0001-01-01: expected a day from 1970-01-01 to 9998-12-31"),
    (["simulate", "--lake", "LAKE", "--start", "9998-12-31", "--days", "2"],
     "error: --start 9998-12-31 --days 2: the last day would be after 9998-12-31"),
    (["run", "--date", "2026-06-10", "--through", "2026-06-09"], "error: --through 2026-06-09 is before --date 2026-06-10"),
    (["run", "--date", "2026-01-01", "--through", "2027-01-02"],
     "error: --date 2026-01-01 --through 2027-01-02: 367 days; at most 366 at a time"),
])
def test_a_day_outside_the_calendar_a_reading_can_have_is_refused_before_any_work(tmp_path, args, message):
    args = [str(tmp_path / "lake") if a == "LAKE" else a for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and result.output.strip() == message
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("args, message", [
    (["simulate", "--lake", "LAKE", "--interval-s", "0"],
     "error: --interval-s 0: expected 250 ms to 60 s, dividing 86400 s evenly (a host's day is simulated in memory: below 250 ms it takes more than 2 GB)"),
    (["simulate", "--lake", "LAKE", "--interval-s", "7"],
     "error: --interval-s 7: expected 250 ms to 60 s, dividing 86400 s evenly (a host's day is simulated in memory: below 250 ms it takes more than 2 GB)"),
    (["tco", "estimate", "--gpus", "0", "--hours", "3", "--avg-power-w", "300"],
     "error: --gpus 0: expected a positive number"),
    (["carbon", "estimate", "--gpu-hours", "-2", "--avg-power-w", "300", "--grid-gco2e-per-kwh", "50"],
     "error: --gpu-hours -2.0: expected a positive number"),
])
def test_a_bad_number_is_one_line_naming_the_option_before_any_work(tmp_path, args, message):
    args = [str(tmp_path / "lake") if a == "LAKE" else a for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert result.output.strip() == message
