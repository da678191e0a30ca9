"""The collector and the storage under it: one collector per spool folder, a stop on a full disk
that says what it lost, a read-only lake or spool refused in one line with the spool kept, and
intervals that are times."""

from __future__ import annotations

import errno
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import typer
from typer.testing import CliRunner

from joulehouse.collectors import spool as spool_module
from joulehouse.collectors.collect import Collector, StorageError, parse_duration_s
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.sim import SimSource
from joulehouse.collectors.spool import Spool, SpoolInUseError, spool_lock
from joulehouse.collectors.writer import LakeWriteError, write_parquet_atomic
from joulehouse.cli.collect import register

REPO = Path(__file__).resolve().parents[2]


def lake_rows(lake: Path) -> list[dict]:
    rows = []
    for f in sorted(lake.rglob("*.parquet")):
        rows += pq.read_table(f, columns=["sampled_at", "host", "gpu_uuid"]).to_pylist()
    return rows


def cli(*args: str):
    app = typer.Typer()
    register(app)
    return CliRunner().invoke(app, list(args))


def _wait_for(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


@pytest.mark.slow  # runs the collector agent as a process (about a second)
def test_a_second_collector_on_the_same_spool_refuses_and_the_first_keeps_every_row(tmp_path):
    """The issue's reproduction: collector A runs; B starts with another lake on A's spool folder.
    B used to 'recover' A's live segment into its own lake (92 of 152 rows lost, 60 in B's lake)."""
    spool = tmp_path / "spool"
    a = subprocess.Popen(
        [sys.executable, "-m", "joulehouse", "collect", "--source", "sim", "--sim-gpus", "2", "--host", "node-a",
         "--lake", str(tmp_path / "a" / "lake"), "--spool-dir", str(spool), "--interval", "50ms",
         "--flush-interval", "100ms", "--roll-interval", "1s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        _wait_for(lambda: list(spool.glob("*.arrows")))  # A is sampling into its segment
        b = cli("--source", "sim", "--sim-gpus", "2", "--host", "node-b", "--lake", str(tmp_path / "b" / "lake"),
                "--spool-dir", str(spool), "--max-polls", "5")
        assert b.exit_code == 2
        assert re.fullmatch(rf"error: spool folder {spool} is in use by another collector \(pid {a.pid} on .*, since "
                            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\); run one collector per spool folder \(--spool-dir\)\n",
                            b.output), b.output
    finally:
        a.send_signal(signal.SIGTERM)
        out, err = a.communicate(timeout=60)
    assert a.returncode == 0, err
    polled_rows = int(re.search(r"stopped: \d+ polls, (\d+) rows", out)[1])
    rows = lake_rows(tmp_path / "a" / "lake")
    assert len(rows) == polled_rows and {r["host"] for r in rows} == {"node-a"}
    assert not (tmp_path / "b" / "lake").exists() or not lake_rows(tmp_path / "b" / "lake")


@pytest.mark.slow  # runs the collector agent as a process (about a second)
def test_a_second_collector_of_the_same_source_into_the_same_lake_is_refused(tmp_path):
    """With a spool folder of its own, a second collector passed the spool's lock and wrote every
    reading twice, at other instants (40 rows per GPU for 20, review helper-88). Another source
    into the same lake is other streams, and runs."""
    lake = tmp_path / "lake"
    a = subprocess.Popen(
        [sys.executable, "-m", "joulehouse", "collect", "--source", "sim", "--sim-gpus", "2", "--host", "node-a",
         "--lake", str(lake), "--spool-dir", str(tmp_path / "spool-a"), "--interval", "50ms",
         "--flush-interval", "100ms", "--roll-interval", "1s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        _wait_for(lambda: list((tmp_path / "spool-a").glob("*.arrows")))
        b = cli("--source", "sim", "--sim-gpus", "2", "--host", "node-a", "--lake", str(lake),
                "--spool-dir", str(tmp_path / "spool-b"), "--max-polls", "5")
        assert b.exit_code == 2 and "another collector writes source 'sim' into the lake" in b.output, b.output
    finally:
        a.send_signal(signal.SIGTERM)
        out, err = a.communicate(timeout=60)
    assert a.returncode == 0, err
    polled_rows = int(re.search(r"stopped: \d+ polls, (\d+) rows", out)[1])
    assert len(lake_rows(lake)) == polled_rows
    again = cli("--source", "sim", "--sim-gpus", "2", "--host", "node-a", "--lake", str(lake),
                "--spool-dir", str(tmp_path / "spool-b"), "--max-polls", "2")
    assert again.exit_code == 0, again.output  # the first one gone, its lock went with it


def test_the_spool_lock_is_released_when_its_holder_stops(tmp_path):
    with spool_lock(tmp_path / "spool"):
        with pytest.raises(SpoolInUseError, match=f"pid {os.getpid()}"):
            with spool_lock(tmp_path / "spool"):
                pass
    with spool_lock(tmp_path / "spool"):  # free again
        pass


def _always_full(fd):
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_stop_on_a_full_disk_counts_the_rows_it_could_not_keep(tmp_path, lake, monkeypatch):
    clock = [1_767_225_600.0]

    def wait(stop, seconds):
        clock[0] += seconds

    c = Collector([SimSource("node-01", gpus=2, clock=lambda: clock[0])], lake=lake,
                  settings=CollectorSettings(interval_s=1.0, spool_flush_interval_s=1.0),
                  spool_dir=tmp_path / "spool", clock=lambda: clock[0], wait=wait)
    monkeypatch.setattr(spool_module.os, "fsync", _always_full)
    stats = c.run(threading.Event(), max_polls=6)
    assert stats.rows == 12 and stats.rows_not_kept == 12 and stats.disk_full_events >= 1
    assert not list((tmp_path / "spool").glob("*.arrows")), "no empty segment left per failed flush"


CHILD_ON_FULL_DISK = """
import errno, os, sys
from joulehouse.collectors import spool
real = os.fsync
calls = []
def fsync(fd):
    calls.append(fd)
    if len(calls) > 4:  # the disk fills after the first flushes
        raise OSError(errno.ENOSPC, "No space left on device")
    return real(fd)
spool.os.fsync = fsync
from joulehouse.cli.main import app
app(sys.argv[1:])
"""


@pytest.mark.slow  # runs the collector agent as a process (about a second)
def test_sigterm_on_a_full_disk_says_how_many_rows_are_lost_and_exits_non_zero(tmp_path):
    spool, polled = tmp_path / "spool", tmp_path / "lake"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD_ON_FULL_DISK, "collect", "--source", "sim", "--sim-gpus", "2", "--host", "n",
         "--lake", str(polled), "--spool-dir", str(spool), "--interval", "20ms", "--flush-interval", "50ms"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        _wait_for(lambda: list(spool.glob("*.arrows")))
        time.sleep(0.5)  # well past the fill: rows are held in memory now
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    last = err.strip().splitlines()[-1]
    found = re.fullmatch(rf"error: (\d+) of (\d+) rows could not be kept and are lost: the spool {spool} could not "
                         r"be written up to the stop \(its disk was full\); 1 spool segments stay for the next start",
                         last)
    assert found, last
    lost, total = int(found[1]), int(found[2])
    segment_rows = spool_module.read_segment(next(spool.glob("*.arrows"))).num_rows
    assert 0 < lost < total and segment_rows + lost == total, (segment_rows, lost, total)


@pytest.mark.parametrize("field", ["interval_s", "spool_flush_interval_s", "roll_interval_s", "ipmi_interval_s",
                                   "dcgm_sync_interval_s"])
@pytest.mark.parametrize("value", [math.nan, math.inf, 0.0, -1.0])
def test_an_interval_that_is_not_a_time_is_refused_naming_it(tmp_path, field, value):
    """The settings refuse it where they are read; a Collector handed settings that went round the
    check (a field set on the frozen dataclass) refuses it too, before its loop can spin."""
    with pytest.raises(ValueError, match=field):
        CollectorSettings(**{field: value})
    unchecked = CollectorSettings()
    object.__setattr__(unchecked, field, value)
    with pytest.raises(ValueError, match=rf"collector {field} = {value!r}: expected a finite number of seconds"):
        Collector([SimSource("n", gpus=1)], lake=tmp_path / "lake", spool_dir=tmp_path / "spool", settings=unchecked)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "0", "-1", "0ms", "nans"])
def test_a_duration_that_is_not_a_time_is_refused(text):
    with pytest.raises(ValueError, match="duration"):
        parse_duration_s(text)


@pytest.mark.parametrize("args, env", [(["--interval", "nan"], {}), (["--interval", "inf"], {}),
                                       ([], {"JOULEHOUSE_COLLECTOR__INTERVAL_S": "nan"}),
                                       ([], {"JOULEHOUSE_COLLECTOR__INTERVAL_S": "-1"}),
                                       ([], {"JOULEHOUSE_COLLECTOR__INTERVAL_S": "0"})])
def test_the_command_refuses_such_an_interval_in_one_line(tmp_path, monkeypatch, args, env):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = cli("--source", "sim", "--lake", str(tmp_path / "lake"), "--max-polls", "50", *args)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1, result.output
    assert result.output.startswith("error: ") and "interval" in result.output
    assert any(why in result.output for why in ("above zero", "greater than or equal to 0.01", "finite number"))
    assert not (tmp_path / "lake").exists()


def test_an_unwritable_lake_or_spool_is_one_line_and_the_segments_stay(tmp_path):
    """A path that cannot be a folder (a file sits where a parent should be): no traceback."""
    sp = Spool(tmp_path / "spool", tmp_path / "lake", "gpu_samples")
    sp.append(SimSource("n", gpus=2).read())
    sp.flush()  # a segment a previous collector left
    [segment] = list((tmp_path / "spool").glob("*.arrows"))
    (tmp_path / "blocked").write_text("a file, not a folder")
    lake = cli("--source", "sim", "--lake", str(tmp_path / "blocked" / "lake"), "--spool-dir", str(tmp_path / "spool"),
               "--max-polls", "2")
    assert lake.exit_code == 2 and lake.output.startswith(f"error: lake {tmp_path}/blocked/lake is not writable")
    assert len(lake.output.strip().splitlines()) == 1 and segment.exists()
    spool = cli("--source", "sim", "--lake", str(tmp_path / "lake"), "--spool-dir", str(tmp_path / "blocked" / "spool"),
                "--max-polls", "2")
    assert spool.exit_code == 2 and spool.output.startswith(f"error: spool folder {tmp_path}/blocked/spool is not writable")


@pytest.fixture()
def read_only(tmp_path):
    """A real read-only file system (tmpfs remounted ro) holding lake/ and spool/ with one segment;
    skipped where this process may not mount (it needs root)."""
    root = tmp_path / "ro"
    root.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(root)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs needs root")
    try:
        sp = Spool(root / "spool", root / "lake", "gpu_samples")
        sp.append(SimSource("n", gpus=2).read())
        sp.flush()
        sp._segment.sink.close()  # as a killed collector leaves it: flushed, no longer open
        (root / "lake").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(root)], check=True)
        yield root
    finally:
        subprocess.run(["umount", str(root)], check=True)


def test_a_read_only_lake_and_spool_are_refused_in_one_line(read_only, tmp_path):
    [segment] = list((read_only / "spool").glob("*.arrows"))
    lake = cli("--source", "sim", "--lake", str(read_only / "lake"), "--spool-dir", str(tmp_path / "spool"),
               "--max-polls", "2")
    assert lake.exit_code == 2, lake.output
    assert lake.output == f"error: lake {read_only}/lake is not writable (Read-only file system): the collector cannot start\n"
    spool = cli("--source", "sim", "--lake", str(tmp_path / "lake"), "--spool-dir", str(read_only / "spool"),
                "--max-polls", "2")
    assert spool.exit_code == 2, spool.output
    assert spool.output == (f"error: spool folder {read_only}/spool is not writable (Read-only file system): the "
                            "collector cannot start; its 1 segments stay for the next start\n")
    assert segment.exists()
    with pytest.raises(LakeWriteError, match="Read-only file system"):  # a roll into it is the lake's error, kept
        write_parquet_atomic(SimSource("n", gpus=1).read(), read_only / "lake" / "gpu_samples" / "date=2026-01-01"
                             / "host=n" / "part-x.parquet")
    with pytest.raises(StorageError):
        Collector([SimSource("n", gpus=1)], lake=read_only / "lake", spool_dir=tmp_path / "spool2",
                  settings=CollectorSettings()).run(threading.Event(), max_polls=1)


def test_the_configured_spool_folder_is_the_one_collect_uses(tmp_path, monkeypatch):
    """An operator's trial: [collector] spool_dir (TOML or JOULEHOUSE_COLLECTOR__SPOOL_DIR) was
    ignored: the spool was always <lake>/../spool, so a spool moved to its own disk never was."""
    from typer.testing import CliRunner

    from joulehouse.cli.main import app

    lake, spool = tmp_path / "node" / "lake", tmp_path / "fast-disk" / "spool"
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__SPOOL_DIR", str(spool))
    result = CliRunner().invoke(app, ["collect", "--source", "sim", "--lake", str(lake), "--interval", "100ms",
                                      "--max-polls", "2", "--host", "node-01"])
    assert result.exit_code == 0, result.output
    assert spool.is_dir() and not (lake.parent / "spool").exists()
    flag = tmp_path / "flag-spool"
    result = CliRunner().invoke(app, ["collect", "--source", "sim", "--lake", str(lake), "--interval", "100ms",
                                      "--max-polls", "1", "--host", "node-01", "--spool-dir", str(flag)])
    assert result.exit_code == 0 and flag.is_dir(), result.output  # the flag comes first
    monkeypatch.delenv("JOULEHOUSE_COLLECTOR__SPOOL_DIR")
    result = CliRunner().invoke(app, ["collect", "--source", "sim", "--lake", str(lake), "--interval", "100ms",
                                      "--max-polls", "1", "--host", "node-01"])
    assert result.exit_code == 0 and (lake.parent / "spool").is_dir(), result.output  # unset: beside the lake
