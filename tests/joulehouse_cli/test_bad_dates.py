"""Every command that takes a day refuses a bad one the same way: one line, exit 2, naming the
option and the format (they used to print three different ways, one of them a usage panel)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from joulehouse_cli.main import app


@pytest.mark.parametrize("args, option, value", [
    (["run", "--date", "2026-13-01"], "--date", "2026-13-01"),
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
