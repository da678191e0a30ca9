"""stg_gpu_samples as Parquet files beside the warehouse file (warehouse/readings.py).

What a user relies on: the relation keeps its rows and columns; the DuckDB file holds no copy of
the readings; a rebuilt day shows only its new rows; a failed build changes nothing a reader
sees and leaves no file behind; files let go survive for readers of an older snapshot and are
then deleted; a warehouse built when stg_gpu_samples was a table keeps its readings.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import duckdb
import pytest
from warehouse_lakes import DAY, NOW, gpu_rows, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse import build
from joulehouse.warehouse.build import BuildError, build_day
from joulehouse.warehouse.db import connect
from joulehouse.warehouse.readings import REGISTRY, refresh_view

SETTINGS = WarehouseSettings(readings_superseded_keep_s=0)


def _listed(con) -> list[str]:
    return [p for (p,) in con.execute(f"SELECT path FROM {REGISTRY} ORDER BY path").fetchall()]


def _on_disk(tmp_path) -> list[str]:
    return sorted(str(p) for p in (tmp_path / "warehouse" / "readings").rglob("*.parquet"))


def test_the_readings_are_files_beside_the_warehouse_and_a_rebuild_replaces_them(tmp_path, lake):
    write(lake, gpu_rows(range(0, 600), 100.0) + gpu_rows(range(0, 600), 50.0, uuid="GPU-1", host="node-02"))
    con = connect(tmp_path / "warehouse.duckdb", lake)
    build_day(con, DAY, SETTINGS, now=NOW)
    first = _listed(con)
    assert first and all(p.startswith(str(tmp_path / "warehouse" / "readings" / "stg_gpu_samples" / f"day={DAY}"))
                         for p in first)
    assert con.execute("SELECT table_type FROM information_schema.tables WHERE table_name = 'stg_gpu_samples'"
                       ).fetchone() == ("VIEW",)
    rows = con.execute("SELECT gpu_uuid, count(*), sum(power_w), count(interval_s) FROM stg_gpu_samples "
                       "GROUP BY ALL ORDER BY ALL").fetchall()
    assert rows == [("GPU-0", 600, 60000.0, 599), ("GPU-1", 600, 30000.0, 599)]

    # The lake's day is corrected (GPU-1 gone) and rebuilt: only the new rows show.
    for path in (lake / "gpu_samples").rglob("*.parquet"):
        path.unlink()
    write(lake, gpu_rows(range(0, 300), 100.0))
    build_day(con, DAY, SETTINGS, now=NOW)
    second = _listed(con)
    assert not set(first) & set(second)
    assert con.execute("SELECT gpu_uuid, count(*) FROM stg_gpu_samples GROUP BY ALL").fetchall() == [("GPU-0", 300)]
    # the first build's files outlive it for readers of the older snapshot, until the next build
    assert set(first) <= set(_on_disk(tmp_path))
    build_day(con, DAY + dt.timedelta(days=1), SETTINGS, now=NOW)
    assert not set(first) & set(_on_disk(tmp_path))
    assert set(second) <= set(_on_disk(tmp_path))
    con.close()


def test_files_let_go_are_kept_for_the_time_the_settings_say(tmp_path, lake):
    write(lake, gpu_rows(range(0, 60), 100.0))
    con = connect(tmp_path / "warehouse.duckdb", lake)
    hour = WarehouseSettings(readings_superseded_keep_s=3600)
    build_day(con, DAY, hour, now=NOW)
    first = _listed(con)
    build_day(con, DAY, hour, now=NOW)
    build_day(con, DAY, hour, now=NOW)
    assert set(first) <= set(_on_disk(tmp_path))  # written seconds ago: a reader may still read them
    old = time.time() - 7200
    for path in first:
        os.utime(path, (old, old))
    build_day(con, DAY, hour, now=NOW)
    assert not set(first) & set(_on_disk(tmp_path))
    con.close()


def test_the_keep_window_starts_when_a_file_is_let_go_not_when_it_was_written(tmp_path, lake):
    """A day built two hours ago, rebuilt, then the next day built at once (a backfill): its old
    files were deleted by that next build, aged by their write time, under a reader still reading
    them. They are kept for keep_s from the rebuild; so are the files retention lets go."""
    write(lake, gpu_rows(range(0, 60), 100.0))
    con = connect(tmp_path / "warehouse.duckdb", lake)
    hour = WarehouseSettings(readings_superseded_keep_s=3600)
    build_day(con, DAY, hour, now=NOW)
    first = _listed(con)
    written_long_ago = time.time() - 7200
    for path in first:
        os.utime(path, (written_long_ago, written_long_ago))
    build_day(con, DAY, hour, now=NOW)
    build_day(con, DAY + dt.timedelta(days=1), hour, now=NOW)
    assert set(first) <= set(_on_disk(tmp_path))
    retained = WarehouseSettings(readings_superseded_keep_s=3600, readings_retention_days=1)
    second = _listed(con)
    for path in second:
        os.utime(path, (written_long_ago, written_long_ago))
    build_day(con, DAY + dt.timedelta(days=5), retained, now=NOW + dt.timedelta(days=5))  # prunes DAY and DAY + 1
    build_day(con, DAY + dt.timedelta(days=6), retained, now=NOW + dt.timedelta(days=6))
    assert set(second) <= set(_on_disk(tmp_path)) and not set(second) & set(_listed(con))
    con.close()


def test_a_failed_build_keeps_the_day_a_reader_saw_and_leaves_no_file(tmp_path, lake, monkeypatch):
    write(lake, gpu_rows(range(0, 600), 100.0))
    con = connect(tmp_path / "warehouse.duckdb", lake)
    build_day(con, DAY, SETTINGS, now=NOW)
    before, files_before = con.execute("SELECT count(*), sum(power_w) FROM stg_gpu_samples").fetchone(), _on_disk(tmp_path)
    # The lake changes, and the build fails after the day's new readings were written (the disk
    # fills while the coverage is written, say).
    write(lake, gpu_rows(range(600, 900), 100.0))
    real = build._create_or_replace_rows

    def failing(con, rel, *args):
        if rel.name == "fct_gpu_coverage_daily":
            assert len(_on_disk(tmp_path)) > len(files_before)  # the new readings were written
            raise duckdb.IOException("No space left on device")
        return real(con, rel, *args)

    monkeypatch.setattr(build, "_create_or_replace_rows", failing)
    with pytest.raises(BuildError, match="fct_gpu_coverage_daily.*No space left"):
        build_day(con, DAY, SETTINGS, now=NOW)
    assert con.execute("SELECT count(*), sum(power_w) FROM stg_gpu_samples").fetchone() == before
    assert _on_disk(tmp_path) == files_before
    con.close()


def test_a_warehouse_whose_readings_were_a_table_keeps_them(tmp_path, lake):
    """Built by a version that stored stg_gpu_samples inside the file: the next build moves the
    older days' readings to files, so nothing a user reads changes."""
    write(lake, gpu_rows(range(0, 600), 100.0) + gpu_rows(range(86400, 86700), 80.0))
    con = connect(tmp_path / "warehouse.duckdb", lake)
    build_day(con, DAY, SETTINGS, now=NOW)
    expected = con.execute("SELECT * FROM stg_gpu_samples ORDER BY sampled_at").fetchall()
    # what such a file held: a table of readings and no list of files
    con.execute("CREATE TABLE old_readings AS SELECT * FROM stg_gpu_samples")
    con.execute("DROP VIEW stg_gpu_samples")
    con.execute(f"DROP TABLE {REGISTRY}")
    con.execute("ALTER TABLE old_readings RENAME TO stg_gpu_samples")
    for path in _on_disk(tmp_path):
        os.remove(path)

    build_day(con, DAY + dt.timedelta(days=1), SETTINGS, now=NOW)
    assert con.execute("SELECT * FROM stg_gpu_samples WHERE day = ? ORDER BY sampled_at", [DAY]).fetchall() == expected
    assert con.execute("SELECT count(*) FROM stg_gpu_samples WHERE day = ?", [DAY + dt.timedelta(days=1)]).fetchone() == (300,)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'stg_gpu_samples'").fetchone() == (0,)
    con.close()


def test_a_path_with_a_quote_is_read_as_written(tmp_path, lake):
    folder = tmp_path / "o'brien's"
    folder.mkdir()
    write(lake, gpu_rows(range(0, 60), 100.0))
    con = connect(folder / "warehouse.duckdb", lake)
    build_day(con, DAY, SETTINGS, now=NOW)
    refresh_view(con)
    assert con.execute("SELECT count(*) FROM stg_gpu_samples").fetchone() == (60,)
    con.close()


def _encodings(con, paths: list[str]) -> dict[str, set[str]]:
    rows = con.execute("SELECT path_in_schema, encodings FROM parquet_metadata(?)", [paths]).fetchall()
    found: dict[str, set[str]] = {}
    for column, encodings in rows:
        found.setdefault(column, set()).update(e.strip() for e in encodings.split(","))
    return found


def test_keys_keep_their_dictionaries_and_a_measured_ratio_is_stored_without_one(tmp_path, lake):
    """What a query over the files filters and groups by (host, GPU, source, clock) is
    dictionary-encoded; a measurement with thousands of values a row group is not: filling its
    dictionary cost a quarter of the write, for a larger file."""
    rows = [dict(r, sm_active_ratio=(i % 2000) / 2000.0, sm_clock_mhz=1980 if i % 600 < 300 else 1410)
            for i, r in enumerate(gpu_rows(range(0, 20000), lambda t: 100.0 + t % 50))]
    write(lake, rows)
    con = connect(tmp_path / "warehouse.duckdb", lake)
    build_day(con, DAY, SETTINGS, now=NOW)
    encodings = _encodings(con, _listed(con))
    for key in ("host", "gpu_uuid", "source", "sm_clock_mhz"):
        assert "RLE_DICTIONARY" in encodings[key], (key, encodings[key])
    assert "RLE_DICTIONARY" not in encodings["sm_active_ratio"], encodings["sm_active_ratio"]
    assert con.execute("SELECT count(*), count(DISTINCT sm_active_ratio) FROM stg_gpu_samples").fetchone() == (20000, 2000)
    con.close()


def test_a_warehouse_moved_to_another_folder_reads_and_keeps_its_readings(tmp_path):
    """The list holds the paths the files were written at: a site copied elsewhere (cp -a, its
    files older than the keep window) and the old place removed, its next build deleted every
    readings file of the new place as unlisted, then failed on the old paths."""
    import shutil

    old, new = tmp_path / "old", tmp_path / "new"
    write(old / "lake", gpu_rows(range(0, 600), 100.0) + gpu_rows(range(86400, 87000), 100.0))
    con = connect(old / "warehouse.duckdb", old / "lake")
    build_day(con, DAY, SETTINGS, now=NOW)
    con.close()
    shutil.copytree(old, new)
    shutil.rmtree(old)
    long_ago = time.time() - 7200
    for path in (new / "warehouse").rglob("*.parquet"):
        os.utime(path, (long_ago, long_ago))
    from joulehouse.warehouse.sqlrun import open_read_only, run_query

    reader = open_read_only(new / "warehouse.duckdb")  # `joulehouse sql`, before any build at the new place
    assert [r for b in run_query(reader, "SELECT count(*) FROM stg_gpu_samples").batches for r in b] == [(600,)]
    reader.close()
    con = connect(new / "warehouse.duckdb", new / "lake")
    build_day(con, DAY + dt.timedelta(days=1), SETTINGS, now=NOW)
    assert con.execute("SELECT day, count(*) FROM stg_gpu_samples GROUP BY day ORDER BY day").fetchall() == [
        (DAY, 600), (DAY + dt.timedelta(days=1), 600)]
    con.close()
    assert {p.parent.name for p in (new / "warehouse" / "readings").rglob("*.parquet")} == {
        f"day={DAY}", f"day={DAY + dt.timedelta(days=1)}"}  # the first day's file is still there


def test_a_session_held_over_two_nightly_runs_still_reads_its_readings(tmp_path, lake):
    """A notebook opened read-only and left over two nightly runs: the first let the oldest day's
    files go past the retention, the second (a day later) deleted them under the notebook, and every
    stg_gpu_samples query failed, days nobody touched too, with the default keep of an hour
    (review, helper-91). The default keeps them two days."""
    from joulehouse.warehouse.publish import published_connection

    write(lake, [r for k in range(4) for r in gpu_rows(range(86400 * k, 86400 * k + 60), 100.0)])
    settings = WarehouseSettings(readings_retention_days=2)
    db = tmp_path / "warehouse.duckdb"

    def nightly(day):
        with published_connection(db, lake) as con:
            build_day(con, day, settings, now=NOW)

    nightly(DAY)
    nightly(DAY + dt.timedelta(days=1))
    notebook = duckdb.connect(str(db), read_only=True)
    try:
        nightly(DAY + dt.timedelta(days=2))  # night 1: DAY's readings past the retention, let go
        for path in (tmp_path / "warehouse" / "readings").rglob("*.parquet"):
            aged = path.stat().st_mtime - 86400  # a day passes
            os.utime(path, (aged, aged))
        nightly(DAY + dt.timedelta(days=3))  # night 2
        day_two = DAY + dt.timedelta(days=1)
        assert notebook.execute("SELECT count(*) FROM stg_gpu_samples WHERE day = ?", [day_two]).fetchone() == (60,)
    finally:
        notebook.close()


def test_the_readings_files_are_on_disk_before_the_publish_that_lists_them(tmp_path, lake, monkeypatch):
    """DuckDB's COPY does not fsync: after a power cut the published warehouse could list a file
    that was lost or empty, and every stg_gpu_samples query failed (review, helper-91)."""
    from joulehouse.warehouse import publish
    from joulehouse.warehouse.publish import published_connection

    write(lake, gpu_rows(range(0, 60), 100.0))
    synced: set[str] = set()
    real_fsync = os.fsync

    def fsync(fd):
        synced.add(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    listed_at_publish: list[str] = []
    real_publish = publish._publish

    def publish_and_note(*args, **kwargs):
        listed_at_publish.extend(str(p) for p in (tmp_path / "warehouse" / "readings").rglob("*.parquet"))
        return real_publish(*args, **kwargs)

    monkeypatch.setattr(publish, "_publish", publish_and_note)
    with published_connection(tmp_path / "warehouse.duckdb", lake) as con:
        build_day(con, DAY, SETTINGS, now=NOW)
    assert listed_at_publish and set(listed_at_publish) <= synced
    assert {str(p.parent) for p in map(Path, listed_at_publish)} <= synced  # the day folder's entry too
