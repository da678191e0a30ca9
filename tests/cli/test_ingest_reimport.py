"""Importing a corrected nvidia-smi log again replaces its rows, also after the DAG compacted the
day: the warehouse then holds the corrected values, not the old ones with the new quarantined as
duplicates."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 1, 2)
HEADER = "timestamp, index, power.draw [W]\n"


def _log(path: Path, gpu: int, watts: float, minutes: int = 2) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "".join(f"2026/01/02 00:{m:02d}:{s:02d}.000, {gpu}, {watts} W\n"
                                     for m in range(minutes) for s in range(0, 60, 10)))
    return path


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_a_corrected_log_replaces_its_rows_after_the_day_was_compacted(tmp_path):
    lake = tmp_path / "lake"
    mine = _log(tmp_path / "site-a" / "gpu.csv", gpu=0, watts=100.0)
    other = _log(tmp_path / "site-b" / "gpu.csv", gpu=1, watts=50.0)  # same name, same host and day
    _run("ingest", "nvidia-smi", str(mine), "--lake", str(lake), "--host", "h1")
    _run("ingest", "nvidia-smi", str(other), "--lake", str(lake), "--host", "h1")
    _run("compact", "--lake", str(lake), "--date", DAY.isoformat())
    partition = lake / "gpu_samples" / "date=2026-01-02" / "host=h1"
    assert len(list(partition.glob("*.parquet"))) == 1, "both logs' rows in one compacted file"
    _log(mine, gpu=0, watts=300.0)  # the log corrected at its source
    out = _run("ingest", "nvidia-smi", str(mine), "--lake", str(lake), "--host", "h1")
    assert "took this log's earlier rows out of" in out
    con = connect(tmp_path / "warehouse.duckdb", lake)
    build_day(con, DAY, WarehouseSettings(), now=dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc))
    power = con.execute("SELECT gpu_index, power_w, count(*) FROM stg_gpu_samples GROUP BY ALL ORDER BY 1").fetchall()
    quarantined = con.execute("SELECT count(*) FROM quarantine_gpu_samples").fetchone()[0]
    con.close()
    assert power == [(0, 300.0, 12), (1, 50.0, 12)] and quarantined == 0


@pytest.mark.integration
def test_on_an_object_store_two_logs_of_one_name_both_land_and_a_reimport_replaces(tmp_path):
    from s3_server import local_s3

    with local_s3("reimport-lake"):
        import s3fs

        first = _log(tmp_path / "a" / "gpu.csv", gpu=0, watts=100.0)
        second = _log(tmp_path / "b" / "gpu.csv", gpu=1, watts=50.0)
        for log in (first, second, first):
            _run("ingest", "nvidia-smi", str(log), "--lake", "s3://reimport-lake/lake", "--host", "h1")
        files = s3fs.S3FileSystem().glob("reimport-lake/lake/gpu_samples/date=2026-01-02/host=h1/*.parquet")
        assert len(files) == 2 and all("part-nvidia-smi-gpu-" in f for f in files)


def test_a_reimport_notes_the_file_it_removes_and_writing_it_again_drops_the_note(tmp_path):
    """Ship withdraws from the central lake only what a re-import noted as removed (retention
    deletes shipped files too, and those the central lake keeps)."""
    lake = tmp_path / "lake"
    log = _log(tmp_path / "gpu.csv", gpu=0, watts=100.0)
    _run("ingest", "nvidia-smi", str(log), "--lake", str(lake), "--host", "h1")
    [utc_file] = (lake / "gpu_samples").rglob("*.parquet")
    utc_note = lake / "_withdrawn" / f"{utc_file.relative_to(lake).as_posix()}.json"
    assert not (lake / "_withdrawn").exists()
    _run("ingest", "nvidia-smi", str(log), "--lake", str(lake), "--host", "h1", "--assume-tz", "Europe/Berlin")
    [berlin_file] = (lake / "gpu_samples").rglob("*.parquet")
    assert "date=2026-01-01" in berlin_file.as_posix() and not utc_file.exists()
    assert utc_note.is_file() and '"log_id"' in utc_note.read_text()
    _run("ingest", "nvidia-smi", str(log), "--lake", str(lake), "--host", "h1")  # back to UTC
    assert utc_file.exists() and not utc_note.exists()
    assert (lake / "_withdrawn" / f"{berlin_file.relative_to(lake).as_posix()}.json").is_file()
