"""A re-imported log replaces its rows at the central lake too: ship mirrors the re-import's
moves and replacements, so the central lake ends with exactly the node's readings (operator
trial: a re-import with another --assume-tz moved a log's rows across midnight and the central
lake kept the old day's file beside the new one, counting that energy twice)."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors import ship as ship_module
from joulehouse.collectors.ship import Manifest, finished_files, ship_lake

HEADER = "timestamp, index, power.draw [W]\n"
# 00:00-00:01 local: read as UTC it is 2 January; as Europe/Berlin (UTC+1) 1 January, 23:00 UTC
UTC_DAY, BERLIN_DAY = "date=2026-01-02", "date=2026-01-01"


def _log(path: Path, gpu: int, watts: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + "".join(f"2026/01/02 00:{m:02d}:{s:02d}.000, {gpu}, {watts} W\n"
                                     for m in range(2) for s in range(0, 60, 10)))
    return path


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _ingest(log: Path, lake: Path, tz: str = "UTC") -> None:
    _cli("ingest", "nvidia-smi", str(log), "--lake", str(lake), "--host", "h1", "--assume-tz", tz)


def _ship(lake: Path, central: Path, manifest: Path) -> str:
    return _cli("ship", "--lake", str(lake), "--to", str(central), "--manifest", str(manifest))


def _readings(lake: Path) -> Counter:
    """Every gpu_samples reading of a lake, as (time, gpu, watts), counted: a doubled reading
    counts 2."""
    rows: Counter = Counter()
    for path in finished_files(lake):
        if path.relative_to(lake).parts[0] != "gpu_samples":
            continue
        table = pq.read_table(path, columns=["sampled_at", "gpu_index", "power_w"])
        rows.update(zip(*(table.column(c).to_pylist() for c in table.column_names)))
    return rows


@pytest.fixture
def lakes(tmp_path: Path) -> tuple[Path, Path, Path]:
    return tmp_path / "node" / "lake", tmp_path / "central", tmp_path / "state" / "ship-manifest.jsonl"


def test_a_reimport_that_moves_a_log_across_midnight_moves_it_at_the_central_lake(tmp_path, lakes):
    lake, central, manifest = lakes
    log = _log(tmp_path / "logs" / "gpu.csv", gpu=0, watts=100.0)
    _ingest(log, lake)
    _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake) and sum(_readings(lake).values()) == 12
    _ingest(log, lake, tz="Europe/Berlin")  # the log was local time: its rows move to 1 January
    assert not list((lake / "gpu_samples" / UTC_DAY).rglob("*.parquet"))
    out = _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake), "the central lake must hold the node's readings once"
    assert not list((central / "gpu_samples" / UTC_DAY).rglob("*.parquet"))
    assert "1 withdrawn" in out
    again = _ship(lake, central, manifest)  # replay-safe: nothing more to do
    assert again.startswith("shipped 0 files") and "withdrawn" not in again
    assert _readings(central) == _readings(lake)


def _shipped_and_compacted(tmp_path, lakes):
    """Two logs of one host imported and shipped, and the central lake's day compacted (each log's
    file merged into one and removed); returns the first log's path."""
    lake, central, manifest = lakes
    mine = _log(tmp_path / "a" / "gpu.csv", gpu=0, watts=100.0)
    _ingest(mine, lake)
    _ingest(_log(tmp_path / "b" / "gpu.csv", gpu=1, watts=50.0), lake)
    _ship(lake, central, manifest)
    _cli("compact", "--lake", str(central), "--date", "2026-01-02")
    return mine


def test_a_same_day_reimport_after_the_central_lake_compacted_the_day_is_not_doubled(tmp_path, lakes):
    """The central DAG compacts each day: the log's file is merged into another and removed.
    Shipping the corrected file again put it beside the compacted rows it replaces."""
    lake, central, manifest = lakes
    mine = _shipped_and_compacted(tmp_path, lakes)
    assert len(list((central / "gpu_samples" / UTC_DAY / "host=h1").glob("*.parquet"))) == 1
    _log(mine, gpu=0, watts=300.0)  # corrected at its source, imported again
    _ingest(mine, lake)
    _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake)
    assert {watts for (_, _, watts) in _readings(central)} == {300.0, 50.0}


def test_a_cross_midnight_reimport_after_the_central_lake_compacted_the_day(tmp_path, lakes):
    lake, central, manifest = lakes
    mine = _shipped_and_compacted(tmp_path, lakes)
    _ingest(mine, lake, tz="Europe/Berlin")
    _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake) and sum(_readings(lake).values()) == 24


def test_retention_deleting_shipped_files_on_the_node_keeps_them_at_the_central_lake(tmp_path, lakes):
    """Only a re-import withdraws a file: the node's retention (find -delete of old partitions)
    removes what was shipped, and the central lake keeps it."""
    lake, central, manifest = lakes
    log = _log(tmp_path / "logs" / "gpu.csv", gpu=0, watts=100.0)
    _ingest(log, lake)
    _ship(lake, central, manifest)
    before = _readings(central)
    for path in finished_files(lake):
        path.unlink()
    _ship(lake, central, manifest)
    assert _readings(central) == before and sum(before.values()) == 12


def test_a_log_moved_away_and_back_then_removed_by_retention_stays_at_the_central_lake(tmp_path, lakes):
    lake, central, manifest = lakes
    log = _log(tmp_path / "logs" / "gpu.csv", gpu=0, watts=100.0)
    _ingest(log, lake)
    _ship(lake, central, manifest)
    _ingest(log, lake, tz="Europe/Berlin")
    _ship(lake, central, manifest)
    _ingest(log, lake)  # back to UTC: the 1 January file is withdrawn, 2 January's is written again
    _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake) and sum(_readings(lake).values()) == 12
    shipped = _readings(central)
    for path in finished_files(lake):
        path.unlink()  # retention
    _ship(lake, central, manifest)
    assert _readings(central) == shipped


def test_moves_between_two_ships_end_as_the_node_lake(tmp_path, lakes):
    """Re-imported twice between ships (UTC, Berlin, UTC, Berlin): the central lake gets the last."""
    lake, central, manifest = lakes
    log = _log(tmp_path / "logs" / "gpu.csv", gpu=0, watts=100.0)
    _ingest(log, lake)
    _ship(lake, central, manifest)
    _ingest(log, lake, tz="Europe/Berlin")
    _ingest(log, lake)
    _ingest(log, lake, tz="Europe/Berlin")
    _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake) and sum(_readings(lake).values()) == 12


class Crash(BaseException):
    """A process dying mid-ship (BaseException: nothing in ship may catch it)."""


@pytest.mark.parametrize("compacted", [False, True], ids=["plain", "compacted-central"])
@pytest.mark.parametrize("crash_at", ["after-new-day-copied", "after-old-day-removed", "after-rows-taken-out",
                                      "before-withdrawal-recorded"])
def test_a_ship_that_dies_between_steps_is_finished_by_the_next(tmp_path, lakes, monkeypatch, crash_at, compacted):
    lake, central, manifest = lakes
    mine = _log(tmp_path / "a" / "gpu.csv", gpu=0, watts=100.0)
    other = _log(tmp_path / "b" / "gpu.csv", gpu=1, watts=50.0)
    _ingest(mine, lake)
    _ingest(other, lake)
    ship_lake(lake, str(central), manifest)
    if compacted:
        _cli("compact", "--lake", str(central), "--date", "2026-01-02")
    _ingest(mine, lake, tz="Europe/Berlin")
    armed = _arm_crash(monkeypatch, crash_at)
    with pytest.raises(Crash):
        ship_lake(lake, str(central), manifest)
    assert armed["fired"]
    monkeypatch.undo()
    ship_lake(lake, str(central), manifest)
    assert _readings(central) == _readings(lake) and sum(_readings(lake).values()) == 24
    entries = Manifest(manifest).load(f"file://{central}")
    assert sum(not e.withdrawn for e in entries.values()) == len(finished_files(lake))


def _arm_crash(monkeypatch, crash_at: str) -> dict:
    """Make ship die at `crash_at`; returns a dict whose "fired" says it did."""
    armed = {"fired": False}

    def fire():
        armed["fired"] = True
        raise Crash(crash_at)

    if crash_at == "after-new-day-copied":
        real_ship = ship_module.Shipper.ship_file

        def ship_then_die(self, path, rel):
            entry = real_ship(self, path, rel)
            if BERLIN_DAY in rel:
                fire()
            return entry

        monkeypatch.setattr(ship_module.Shipper, "ship_file", ship_then_die)
    elif crash_at in ("after-old-day-removed", "after-rows-taken-out"):
        from joulehouse.collectors import ship_withdraw

        name = "remove_at_destination" if crash_at == "after-old-day-removed" else "take_out_at_destination"
        real = getattr(ship_withdraw, name)

        def step_then_die(*args, **kwargs):
            result = real(*args, **kwargs)
            fire()
            return result

        monkeypatch.setattr(ship_withdraw, name, step_then_die)
    else:
        real_append = Manifest.append

        def append_or_die(self, entry):
            if entry.withdrawn:
                fire()
            real_append(self, entry)

        monkeypatch.setattr(Manifest, "append", append_or_die)
    return armed


def test_an_import_that_died_before_removing_its_file_withdraws_nothing(tmp_path, lakes):
    """The import notes a file, then removes it: a crash between leaves the note beside the file,
    which is still in the node's lake, so the central lake keeps it too."""
    lake, central, manifest = lakes
    _ingest(_log(tmp_path / "logs" / "gpu.csv", gpu=0, watts=100.0), lake)
    _ship(lake, central, manifest)
    [path] = finished_files(lake)
    rel = path.relative_to(lake).as_posix()
    note = lake / "_withdrawn" / f"{rel}.json"
    note.parent.mkdir(parents=True)
    note.write_text(json.dumps({"path": rel, "log_id": pq.read_table(path)["import_log_id"][0].as_py()}))
    out = _ship(lake, central, manifest)
    assert "withdrawn" not in out and _readings(central) == _readings(lake)


def test_a_replacement_holds_the_partition_against_the_central_compaction(tmp_path, lakes, monkeypatch):
    """Between copying the corrected file and taking the log's old rows out of the compacted one,
    a compaction merging the new copy would have those rows taken out as well: it must wait."""
    import datetime as dt

    from joulehouse.warehouse.lake_compact import CompactionError, compact_partition

    lake, central, manifest = lakes
    mine = _shipped_and_compacted(tmp_path, lakes)
    _log(mine, gpu=0, watts=300.0)
    _ingest(mine, lake)
    real_ship = ship_module.Shipper.ship_file
    refused = []

    def ship_then_compact(self, path, rel):
        entry = real_ship(self, path, rel)
        with pytest.raises(CompactionError, match="another compaction"):
            compact_partition(central, dt.date(2026, 1, 2), "h1", "gpu_samples")
        refused.append(rel)
        return entry

    monkeypatch.setattr(ship_module.Shipper, "ship_file", ship_then_compact)
    ship_lake(lake, str(central), manifest)
    assert refused and _readings(central) == _readings(lake)


def test_an_object_store_destination_loses_the_withdrawn_file_too(tmp_path, lakes):
    import uuid

    import fsspec

    from joulehouse.collectors.ship import Shipper

    lake, _, manifest = lakes
    url = f"memory://central-{uuid.uuid4().hex[:8]}"
    fs, root = fsspec.core.url_to_fs(url)
    log = _log(tmp_path / "logs" / "gpu.csv", gpu=0, watts=100.0)
    _ingest(log, lake)
    Shipper(lake, url, manifest, rename=False).run()  # one PUT per file, as on S3
    _ingest(log, lake, tz="Europe/Berlin")
    report = Shipper(lake, url, manifest, rename=False).run()
    assert report.withdrawn == 1
    assert {p[len(root) + 1:] for p in fs.find(root)} == {p.relative_to(lake).as_posix() for p in finished_files(lake)}


def _forget_day(manifest: Path, day: str) -> None:
    """The manifest loses its lines for `day`'s files (a crash cut the last line; a node rebuilt
    with its lake but not its state folder): ship must not take that for "never sent"."""
    lines = manifest.read_text().splitlines(keepends=True)
    manifest.write_text("".join(line for line in lines if day not in json.loads(line)["path"]))


def test_a_reimport_after_compaction_of_a_file_the_manifest_lost_is_not_doubled(tmp_path, lakes):
    lake, central, manifest = lakes
    mine = _shipped_and_compacted(tmp_path, lakes)
    _forget_day(manifest, UTC_DAY)
    _log(mine, gpu=0, watts=300.0)
    _ingest(mine, lake)
    _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake), "the compacted file's old rows of the log must go"
    assert {watts for (_, _, watts) in _readings(central)} == {300.0, 50.0}


@pytest.mark.parametrize("compacted", [False, True], ids=["plain", "compacted-central"])
def test_a_move_of_a_file_the_manifest_lost_is_withdrawn_at_the_central_lake(tmp_path, lakes, compacted):
    lake, central, manifest = lakes
    mine = _shipped_and_compacted(tmp_path, lakes) if compacted else _log(tmp_path / "a" / "gpu.csv", 0, 100.0)
    if not compacted:
        _ingest(mine, lake)
        _ship(lake, central, manifest)
    _forget_day(manifest, UTC_DAY)
    _ingest(mine, lake, tz="Europe/Berlin")
    out = _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake) and "1 withdrawn" in out
    assert not re.search(r"\d+ withdrawn", _ship(lake, central, manifest)), "a withdrawal is done once, then recorded"


def test_a_file_withdrawn_before_it_was_ever_shipped_is_recorded_once(tmp_path, lakes):
    lake, central, manifest = lakes
    log = _log(tmp_path / "logs" / "gpu.csv", gpu=0, watts=100.0)
    _ingest(log, lake)
    _ingest(log, lake, tz="Europe/Berlin")  # moved before the first ship
    _ship(lake, central, manifest)
    assert _readings(central) == _readings(lake) and sum(_readings(central).values()) == 12
    assert not re.search(r"\d+ withdrawn", _ship(lake, central, manifest))
