"""A grid or price file past the reference-CSV bound is refused in one line naming it, before
polars reads it whole (a whole market's nodes, a wrong file: several times its size in memory)."""

from __future__ import annotations

import pytest

from joulehouse.reports.accounts import csv_cells
from joulehouse.reports.accounts.grid import GridFileError, load_electricitymaps_csv
from joulehouse.reports.accounts.prices import PriceFileError, load_pjm_lmp_csv

GRID = ("Datetime (UTC),Zone Id,Carbon Intensity gCO2eq/kWh (direct),Carbon Intensity gCO2eq/kWh (LCA),"
        "Renewable Percentage\n" + "".join(f"01/01/2022 {h:02d}:00,FR,{50 + h},{70 + h},30\n" for h in range(24)))
PJM = ("datetime_beginning_utc,pnode_name,total_lmp_da\n"
       + "".join(f"1/1/2025 {h % 12 + 1}:00:00 {'AM' if h < 12 else 'PM'},PJM-RTO,{20 + h}.5\n" for h in range(24)))


def test_files_within_the_bound_are_read(tmp_path):
    (tmp_path / "grid.csv").write_text(GRID)
    (tmp_path / "pjm.csv").write_text(PJM)
    assert load_electricitymaps_csv(tmp_path / "grid.csv").height == 24
    assert load_pjm_lmp_csv(tmp_path / "pjm.csv", "PJM-RTO").height == 24


@pytest.mark.parametrize("name, text, load, error", [
    ("grid.csv", GRID, load_electricitymaps_csv, GridFileError),
    ("pjm.csv", PJM, lambda path: load_pjm_lmp_csv(path, "PJM-RTO"), PriceFileError),
])
def test_a_file_past_the_bound_is_refused_naming_it(tmp_path, monkeypatch, name, text, load, error):
    path = tmp_path / name
    path.write_text(text)
    monkeypatch.setattr(csv_cells, "MAX_REFERENCE_CSV_BYTES", len(text.encode()) - 1)
    with pytest.raises(error) as caught:
        load(path)
    message = str(caught.value)
    assert str(path) in message and "expected at most" in message and "\n" not in message


def test_a_grid_file_is_read_once_to_pick_its_loader_and_parse_it(tmp_path, monkeypatch):
    """The header picked the loader from one whole read and the loader read the file again: a file
    near the bound cost twice its reading and twice its memory."""
    from joulehouse.reports.accounts import grid

    (tmp_path / "grid.csv").write_text(GRID)
    reads = []
    real = grid._read_csv
    monkeypatch.setattr(grid, "_read_csv", lambda path: reads.append(path) or real(path))
    assert grid.load_intensity_file(tmp_path / "grid.csv").height == 24
    assert len(reads) == 1
