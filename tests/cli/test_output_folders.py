"""A command's output folder is checked before any work starts: a file in its place, a folder that
cannot be made or written, is one line naming the option (exit 2), never a traceback
(FileExistsError, FileNotFoundError, NotADirectoryError on a .part-*.parquet.tmp, as before)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app

SIM = ["--gpus", "1", "--days", "1", "--start", "2026-01-01", "--seed", "1"]


@pytest.mark.parametrize("args, says", [
    (["demo", "--out", "FILE"], "--out FILE is a file, not a folder: give the demo's output folder"),
    (["demo", "--out", "FILE/sub"], "--out FILE/sub: cannot create the folder (Not a directory)"),
    (["demo", "--out", "/proc/joulehouse-nope"], "--out /proc/joulehouse-nope: cannot create the folder"),
    (["simulate", "--lake", "FILE", *SIM], "--lake FILE is a file, not a folder: give the lake's folder"),
    (["simulate", "--lake", "FILE/lake", *SIM], "--lake FILE/lake: cannot create the folder (Not a directory)"),
    (["run", "--date", "2026-01-01", "--airflow-home", "FILE"],
     "--airflow-home FILE is a file, not a folder: give the Airflow home folder"),
    (["keys", "generate", "--out", "FILE"], "--out FILE is a file, not a folder: give the folder for the key pair"),
], ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else None)
def test_an_output_path_that_cannot_be_a_folder_is_one_line(tmp_path, args, says):
    file = tmp_path / "taken"
    file.write_text("someone's file\n")
    args = [a.replace("FILE", str(file)) for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {says.replace('FILE', str(file))}"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert file.read_text() == "someone's file\n" and sorted(p.name for p in tmp_path.iterdir()) == ["taken"]
