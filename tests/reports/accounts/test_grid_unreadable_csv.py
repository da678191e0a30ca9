"""A grid intensity file that is not a readable CSV is a one-line error naming the file, as a price
file's is: polars' own error (no file named) ended `carbon estimate` with a traceback."""

from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from joulehouse.cli.carbon import register as register_carbon
from joulehouse.reports.accounts.grid import GridFileError, load_intensity_file

HEADER = "at,region,gco2e_per_kwh\n"
NOT_CSV = {
    "empty": b"",
    "ragged row": (HEADER + "2024-01-01T00:00:00Z,FR,50,9\n").encode(),
    "open quote": (HEADER + '2024-01-01T00:00:00Z,FR,"50\n').encode(),
    "not UTF-8": HEADER.encode() + "2024-01-01T00:00:00Z,F\xc9,50\n".encode("latin-1"),
}


@pytest.mark.parametrize("case", sorted(NOT_CSV))
def test_a_grid_file_that_is_not_a_readable_csv_is_a_grid_file_error_naming_it(tmp_path, case):
    path = tmp_path / "grid.csv"
    path.write_bytes(NOT_CSV[case])
    with pytest.raises(GridFileError, match=f"grid intensity file {path} is not a CSV file that can be read"):
        load_intensity_file(path, "FR")


def test_carbon_estimate_with_an_unreadable_grid_file_exits_with_one_line(tmp_path):
    app = typer.Typer()
    register_carbon(app)
    app.command("noop")(lambda: None)  # a group of commands, as in the real CLI
    path = tmp_path / "grid.csv"
    path.write_bytes(NOT_CSV["ragged row"])
    result = CliRunner().invoke(app, ["carbon", "estimate", "--gpus", "1", "--hours", "4", "--avg-power-w", "500",
                                      "--region", "FR", "--grid-file", str(path), "--start", "2024-01-01T00:00:00Z"])
    assert result.exit_code == 2, result.exception
    assert str(path) in result.stderr and result.stderr.count("\n") == 1
