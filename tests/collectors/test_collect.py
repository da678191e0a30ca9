"""The collect loop and its spool: nothing lost beyond one flush interval, every file readable."""

from __future__ import annotations

import errno
import os
import random
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
from joulehouse.collectors.collect import Collector, parse_duration_s
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.sim import SimSource
from joulehouse.collectors.spool import Spool, recover
from joulehouse.cli.collect import register

REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self):
        self.t = 1_767_225_600.0

    def __call__(self):
        return self.t


def lake_rows(lake: Path) -> list[dict]:
    rows = []
    for f in sorted(lake.rglob("*.parquet")):
        rows += pq.read_table(f, columns=["sampled_at", "gpu_uuid"]).to_pylist()
    return rows


def test_every_polled_row_reaches_the_lake(tmp_path, lake):
    clock = FakeClock()
    settings = CollectorSettings(interval_s=1.0, spool_flush_interval_s=2.0, roll_interval_s=5.0)
    c = Collector([SimSource("node-01", gpus=4, clock=clock)], lake=lake, settings=settings,
                  spool_dir=tmp_path / "spool", clock=clock)
    for _ in range(12):
        c.poll()
        clock.t += 1.0
    c.flush()
    rows = lake_rows(lake)
    assert len(rows) == 48
    assert len({(r["sampled_at"], r["gpu_uuid"]) for r in rows}) == 48
    assert c.stats.files_written >= 2  # rolled by time, not only at the end
    assert not list((tmp_path / "spool").glob("*.arrows"))


def test_unrolled_segment_is_recovered_and_a_torn_batch_skipped(tmp_path, lake):
    sp = Spool(tmp_path / "spool", lake, "gpu_samples")
    src = SimSource("node-01", gpus=2)
    for _ in range(3):
        sp.append(src.read())
        sp.flush()
    [segment] = list((tmp_path / "spool").glob("*.arrows"))
    with open(segment, "ab") as fh:  # a kill in the middle of the next batch
        fh.write(b"\xff\xff\xff\xff\x80\x01\x00\x00partial")
    recover(tmp_path / "spool", lake)
    assert len(lake_rows(lake)) == 6
    assert not segment.exists()
    recover(tmp_path / "spool", lake)  # nothing left: no duplicates
    assert len(lake_rows(lake)) == 6


def _left_segment(spool_dir: Path, lake: Path, flushes: int) -> Path:
    """A segment of `flushes` batches (2 GPUs each) that a killed process left behind."""
    sp = Spool(spool_dir, lake, "gpu_samples")
    src = SimSource("node-01", gpus=2)
    for _ in range(flushes):
        sp.append(src.read())
        sp.flush()
    [segment] = list(spool_dir.glob("*.arrows"))
    return segment


def test_a_segment_that_cannot_be_read_now_is_kept_and_rolled_later_whole(tmp_path, lake, monkeypatch, caplog):
    """An I/O error reading a segment at start (EIO, too many open files) is not a torn batch:
    the segment stays, the collector starts, and its next flush rolls every row."""
    segment = _left_segment(tmp_path / "spool", lake, flushes=5)
    left = {(r["sampled_at"], r["gpu_uuid"]) for r in spool_module.read_segment(segment).to_pylist()}
    assert len(left) == 10
    real_read_bytes = Path.read_bytes

    def failing(path):
        if path == segment:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_read_bytes(path)

    monkeypatch.setattr(Path, "read_bytes", failing)
    clock = FakeClock()
    c = Collector([SimSource("node-02", gpus=1, clock=clock)], lake=lake,
                  settings=CollectorSettings(spool_flush_interval_s=1.0), spool_dir=tmp_path / "spool", clock=clock)
    assert c.recover() == 0
    assert segment.exists() and lake_rows(lake) == [] and "kept for a retry" in caplog.text
    c.poll()
    c.flush()
    assert segment.exists() and c.stats.roll_failures >= 1  # still failing: kept, the loop goes on
    # the stuck segment does not hold back the new one: node-02's reading is in the lake already
    assert lake_rows(lake) and not left & {(r["sampled_at"], r["gpu_uuid"]) for r in lake_rows(lake)}
    monkeypatch.setattr(Path, "read_bytes", real_read_bytes)
    c.flush()
    assert not segment.exists()
    rows = lake_rows(lake)
    assert left <= {(r["sampled_at"], r["gpu_uuid"]) for r in rows}
    assert len(rows) == len({(r["sampled_at"], r["gpu_uuid"]) for r in rows})


def test_a_segment_of_garbage_is_set_aside_and_the_others_rolled(tmp_path, lake):
    segment = _left_segment(tmp_path / "spool", lake, flushes=2)
    garbage = tmp_path / "spool" / "gpu_samples-00000000000000000001-deadbeef.arrows"
    garbage.write_bytes(b"not an arrow stream at all")
    written = recover(tmp_path / "spool", lake)
    assert len(written) == 1 and len(lake_rows(lake)) == 4 and not segment.exists()
    assert garbage.with_suffix(".unreadable").exists()


def test_disk_full_keeps_rows_and_resumes(tmp_path, lake, monkeypatch, caplog):
    clock = FakeClock()
    c = Collector([SimSource("node-01", gpus=2, clock=clock)], lake=lake,
                  settings=CollectorSettings(spool_flush_interval_s=1.0, roll_interval_s=1.0),
                  spool_dir=tmp_path / "spool", clock=clock)
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(spool_module.os, "fsync", full)
    for _ in range(3):
        c.poll()
        clock.t += 1.0
    assert "DISK FULL" in caplog.text and c.stats.disk_full_events >= 1
    monkeypatch.setattr(spool_module.os, "fsync", real_fsync)
    c.poll()
    c.flush()
    c.recover()  # segments that a failed write left behind
    rows = lake_rows(lake)
    assert len({(r["sampled_at"], r["gpu_uuid"]) for r in rows}) == 8
    assert len(rows) == 8, "each reading once: a failed flush's rows are not also left in its segment"


def test_a_failed_flush_leaves_each_row_once_and_rolls_the_earlier_rows_without_a_restart(tmp_path, lake, monkeypatch):
    """fsync fails after the batches reached the segment: the segment is cut back to what earlier
    flushes made durable and queued for the next roll; the held rows go to a fresh segment."""
    sp = Spool(tmp_path / "spool", lake, "gpu_samples")
    src = SimSource("node-01", gpus=2)
    sp.append(src.read())
    sp.flush()  # 2 rows durable
    sp.append(src.read())
    sp.append(src.read())  # 4 rows held
    real_fsync, calls = os.fsync, []

    def once_full(fd):
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    monkeypatch.setattr(spool_module.os, "fsync", once_full)
    with pytest.raises(spool_module.DiskFullError):
        sp.flush()
    assert sp.buffered_rows == 4 and len(sp.pending) == 1
    sp.flush()
    sp.roll()
    rows = lake_rows(lake)
    assert len(rows) == 6 and len({(r["sampled_at"], r["gpu_uuid"]) for r in rows}) == 6
    assert not list((tmp_path / "spool").glob("*.arrows")), "nothing left for a restart to replay"


def test_rows_held_on_a_full_disk_are_merged_and_bounded_by_bytes_and_each_lands_once(tmp_path, lake):
    """Each poll held as its own small table cost ~2.7 KB of memory a row (8 GPUs, 160k rows held:
    2,702 B a row of RSS, 278 merged): with the disk full, the unit's 256M was reached in hours,
    far below the 2 M row bound, and the kernel's kill lost every row held. Polls are merged as
    they are held, the bytes are bounded, and when the disk comes back every row still held lands
    once, the oldest ones dropped and counted."""
    src = SimSource("node-01", gpus=8)
    polls = [src.read() for _ in range(3 * spool_module.MERGE_POLLS)]
    sp = Spool(tmp_path / "spool", lake, "gpu_samples")
    for poll in polls:
        sp.append(poll)
    assert sp.buffered_rows == 8 * len(polls) and len(sp._buffer) <= 3  # three merged runs, not 768 tables
    bound = 200_000
    small = Spool(tmp_path / "spool-small", lake, "gpu_samples", max_buffer_bytes=bound)
    for poll in polls:
        small.append(poll)
        assert small._held_bytes == sum(t.nbytes for t in small._buffer)
    assert small._held_bytes <= bound or len(small._buffer) == 1
    assert small.dropped_rows > 0 and small.dropped_rows + small.buffered_rows == 8 * len(polls)
    small.flush()
    small.roll()
    rows = lake_rows(lake)
    assert len(rows) == 8 * len(polls) - small.dropped_rows
    assert len({(r["sampled_at"], r["gpu_uuid"]) for r in rows}) == len(rows)
    assert max(r["sampled_at"] for r in rows) == max(p.column("sampled_at")[0].as_py() for p in polls)  # newest kept


def test_a_full_disk_at_start_still_takes_the_spool_and_a_second_collector_is_refused(tmp_path, monkeypatch):
    """The lock file could not be made on a full disk: the collector crashed with ENOSPC, a
    traceback every 5 s under systemd, collecting nothing. The lock is the folder's; the note
    that names the holder is written where there is room."""
    import builtins

    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()

    def no_space(path, *args, **kwargs):
        if str(path).endswith(spool_module.LOCK_NAME):
            raise OSError(errno.ENOSPC, "No space left on device")
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(spool_module, "open", no_space, raising=False)
    with spool_module.spool_lock(spool_dir):
        with pytest.raises(spool_module.SpoolInUseError, match="its disk was full when it started"):
            with spool_module.spool_lock(spool_dir):
                pass
    assert not (spool_dir / spool_module.LOCK_NAME).exists()


def test_a_collector_of_the_release_before_holding_the_note_file_keeps_the_spool(tmp_path):
    """The release before locked collector.lock, this one the folder: at an upgrade (the service
    still running, a manual collect beside it) both took the spool. Each lock now stops the other."""
    spool_dir = tmp_path / "spool"
    spool_dir.mkdir()
    (spool_dir / spool_module.LOCK_NAME).write_text("pid 1 on node-01, since 2026-12-01T00:00:00Z\n")
    old = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, sys\n"
        f"fh = open({str(spool_dir / spool_module.LOCK_NAME)!r}, 'a+')\n"
        "fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
        "print('held', flush=True)\n"
        "sys.stdin.readline()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert old.stdout.readline().strip() == "held"
        with pytest.raises(spool_module.SpoolInUseError, match="pid 1 on node-01"):
            with spool_module.spool_lock(spool_dir):
                pass
    finally:
        old.communicate("\n", timeout=30)
    with spool_module.spool_lock(spool_dir):  # once it is gone, and the other way round
        import fcntl

        with open(spool_dir / spool_module.LOCK_NAME, "a+") as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_parse_duration():
    assert parse_duration_s("1s") == 1.0 and parse_duration_s("250ms") == 0.25 and parse_duration_s("2m") == 120
    with pytest.raises(ValueError, match="'soon'"):
        parse_duration_s("soon")


def test_cli_collects_sim_rows(tmp_path):
    app = typer.Typer()
    register(app)
    lake = tmp_path / "lake"
    out = CliRunner().invoke(app, ["--source", "sim", "--lake", str(lake), "--host", "node-03",
                                   "--interval", "10ms", "--sim-gpus", "2", "--max-polls", "5"])
    assert out.exit_code == 0, out.output
    assert len(lake_rows(lake)) == 10
    bad = CliRunner().invoke(app, ["--source", "tpu", "--lake", str(lake)])
    assert bad.exit_code == 2 and "expected one of nvml, dcgm, links, ipmi, sim" in bad.output


CHILD = """
import sys, threading
from joulehouse.collectors.collect import Collector
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.sim import SimSource
lake, spool, polled = sys.argv[1:4]
src = SimSource("node-01", gpus=2)
read = src.read
def logged():
    t = read()
    with open(polled, "a") as fh:  # survives kill -9 (page cache), tells the test what was sampled
        fh.write(str(t.column("sampled_at")[0].value) + "\\n")
    return t
src.read = logged
s = CollectorSettings(interval_s=0.02, spool_flush_interval_s=0.1, roll_interval_s=0.3)
Collector([src], lake=lake, settings=s, spool_dir=spool).run(threading.Event())
"""


@pytest.mark.slow
def test_kill_minus_nine_loses_at_most_one_flush_interval(tmp_path):
    lake, spool, polled = tmp_path / "lake", tmp_path / "spool", tmp_path / "polled.txt"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    rng = random.Random(7)
    kills = 20
    for _ in range(kills):
        before = polled.stat().st_size if polled.exists() else 0
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(lake), str(spool), str(polled)], env=env)
        deadline = time.monotonic() + 30
        while (polled.stat().st_size if polled.exists() else 0) == before and time.monotonic() < deadline:
            time.sleep(0.02)  # wait until this run samples (start-up takes ~1 s), then kill at random
        time.sleep(rng.random() * 0.8)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    recover(spool, lake)
    files = list(lake.rglob("*.parquet"))
    assert files
    for f in files:
        pq.read_table(f)  # every file opens
    assert not list(lake.rglob("*.tmp")) or all(p.name.startswith(".") for p in lake.rglob("*.tmp"))
    sampled = {int(x) for x in polled.read_text().split()}
    landed = {r["sampled_at"] for r in lake_rows(lake)}
    landed_us = {int(t.timestamp() * 1e6) for t in landed}
    rows = lake_rows(lake)
    assert len(rows) == len({(r["sampled_at"], r["gpu_uuid"]) for r in rows})  # no duplicates
    lost = len(sampled - landed_us)
    print(f"kill -9 x{kills}: sampled {len(sampled)} polls, lost {lost}")
    # per kill at most one flush interval (0.1 s) of 0.02 s polls, plus the poll in flight
    assert lost <= kills * (0.1 / 0.02 + 2), (lost, len(sampled))
    assert len(landed_us) > len(sampled) / 2


def test_a_slow_poll_skips_the_missed_ticks_instead_of_bursting(tmp_path, lake):
    """The first read stalls for 6 intervals (a slow disk, a hung driver call): the next polls
    keep their interval rather than fire the missed ones back to back at one instant. The clock and
    the wait are the collector's own seams, so the machine's speed and load do not matter."""
    clock = FakeClock()
    stamps: list[float] = []

    class Slow(SimSource):
        def read(self):
            stamps.append(clock.t)
            if len(stamps) == 1:
                clock.t += 0.3  # the stall
            return super().read()

    def wait(stop, seconds):
        clock.t += seconds

    c = Collector([Slow("node-01", gpus=1, clock=clock)], lake=lake, settings=CollectorSettings(interval_s=0.05),
                  spool_dir=tmp_path / "spool", clock=clock, wait=wait)
    stats = c.run(threading.Event(), max_polls=4)
    gaps = [round(b - a, 6) for a, b in zip(stamps, stamps[1:])]
    assert gaps == [0.3, 0.05, 0.05], "the stall, then the interval kept, not five polls at one instant"
    assert stats.late_polls == 1


def test_a_segment_whose_host_cannot_name_a_folder_is_set_aside_and_the_spool_goes_on(tmp_path, lake, caplog):
    """Readings spooled under a host no lake folder can carry ('a/b'): before, every later start
    died on that segment while recovering it. Those rows are set aside with their reason, the
    segment's other rows and the good segment beside it still land (the whole segment was set
    aside once, and node-01's reading in it never reached the lake)."""
    spool_dir = tmp_path / "spool"
    bad = Spool(spool_dir, lake, "gpu_samples")
    bad.append(SimSource("node-01", gpus=1).read())
    bad.append(SimSource("a/b", gpus=1).read())
    bad.flush()
    [bad_segment] = list(spool_dir.glob("*.arrows"))
    good = _left_segment(tmp_path / "other-spool", lake, flushes=2)
    good.rename(spool_dir / good.name)

    recover(spool_dir, lake)  # raised ValueError before
    rejected = bad_segment.with_suffix(".rejected")
    assert rejected.exists() and not bad_segment.exists()
    assert "1 row: host 'a/b' cannot name a partition folder" in rejected.with_name(rejected.name + ".reason").read_text()
    assert [r["host"] for r in spool_module.read_segment(rejected).to_pylist()] == ["a/b"]
    assert len(lake_rows(lake)) == 5  # the good segment's 2 flushes x 2 GPUs, and node-01's row of the bad one
    assert not list(spool_dir.glob("*.arrows")) and "set aside" in caplog.text
    recover(spool_dir, lake)  # the next start: nothing to recover, nothing written twice
    assert len(lake_rows(lake)) == 5


def test_a_segment_set_aside_on_a_full_disk_does_not_stop_the_start(tmp_path, lake, monkeypatch, caplog):
    """The reason was written after the rename, and on a full disk its ENOSPC crashed the start
    (the collector is meant to hold rows in memory there) and left an empty reason (review,
    helper-88): now it is written first, and a failure to is a warning carrying the reason."""
    import errno
    from pathlib import Path as P

    spool_dir = tmp_path / "spool"
    bad = Spool(spool_dir, lake, "gpu_samples")
    bad.append(SimSource("a/b", gpus=1).read())
    bad.flush()
    [bad_segment] = list(spool_dir.glob("*.arrows"))
    real_write_text = P.write_text

    def full_for_reasons(self, *args, **kwargs):
        if self.name.endswith(".reason"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(P, "write_text", full_for_reasons)
    recover(spool_dir, lake)
    assert bad_segment.with_suffix(".rejected").exists() and not bad_segment.exists()
    assert "cannot write why it is set aside" in caplog.text and "cannot name a partition folder" in caplog.text
    assert [r["host"] for r in spool_module.read_segment(bad_segment.with_suffix(".rejected")).to_pylist()] == ["a/b"]


@pytest.mark.parametrize("host", ["a/b", "..", "n;rm -rf x", "node 01", "host=x", "", "-n", "x" * 254])
def test_collect_refuses_a_host_that_cannot_name_a_lake_folder_before_spooling(tmp_path, host):
    app = typer.Typer()
    register(app)
    lake = tmp_path / "lake"
    out = CliRunner().invoke(app, ["--source", "sim", "--lake", str(lake), "--host", host, "--max-polls", "1",
                                   "--spool-dir", str(tmp_path / "spool")])
    assert out.exit_code == 2, out.output
    assert out.output.startswith("error: --host:") and len(out.output.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.arrows")) and not list(tmp_path.rglob("*.parquet"))


@pytest.mark.parametrize("option, text", [("--interval", "1e9s"), ("--interval", "2h"), ("--flush-interval", "90m"),
                                          ("--ipmi-interval", "3601"), ("--roll-interval", "25h")])
def test_an_interval_past_its_bound_is_refused_in_one_line(tmp_path, option, text):
    """`collect --interval 1e9s --max-polls 1` polled once and then waited out the interval."""
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["--source", "sim", "--lake", str(tmp_path / "lake"), "--host", "node-01",
                                   "--max-polls", "1", option, text])
    assert out.exit_code == 2 and "less than or equal to" in out.output, out.output
    assert len(out.output.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("*.parquet"))


@pytest.mark.parametrize("option, text", [("--interval", "0.0001ms"), ("--interval", "9ms"), ("--flush-interval", "1ms"),
                                          ("--roll-interval", "0.001"), ("--ipmi-interval", "1e-9s"),
                                          ("--dcgm-interval", "0.5ms")])
def test_an_interval_below_ten_milliseconds_is_refused_in_one_line(tmp_path, option, text):
    """`collect --interval 0.0001ms` was taken: a busy loop re-reading NVML (or the spool, the BMC,
    Prometheus) far faster than anything it reads changes."""
    app = typer.Typer()
    register(app)
    out = CliRunner().invoke(app, ["--source", "sim", "--lake", str(tmp_path / "lake"), "--host", "node-01",
                                   "--max-polls", "1", option, text])
    assert out.exit_code == 2, out.output
    assert out.output == f"error: {option} {text!r}: input should be greater than or equal to 0.01 (s)\n"
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("written_before_failing", [b"", b"\xff\xff\xff\xff"], ids=["nothing", "half-end-marker"])
def test_a_roll_whose_close_fails_keeps_every_row_and_rolls_them_at_the_next_try(tmp_path, lake, written_before_failing):
    """The disk fills as the segment's end marker is written: its fsynced rows are rolled at the
    next roll of this same process (not only by a restart's recovery), and its file is not leaked."""
    sp = Spool(tmp_path / "spool", lake, "gpu_samples")
    src = SimSource("node-01", gpus=2)
    sp.append(src.read())
    sp.flush()  # 2 rows durable
    seg = sp._segment

    class FullOnClose:
        def __init__(self, writer):
            self.writer = writer

        def close(self):
            seg.sink.write(written_before_failing)
            raise OSError(errno.ENOSPC, "No space left on device")

    seg.writer = FullOnClose(seg.writer)
    with pytest.raises(spool_module.DiskFullError):
        sp.roll()
    assert seg.sink.closed, "the segment's file is closed, not leaked"
    sp.append(src.read())  # the disk has room again
    sp.flush()
    sp.roll()
    rows = lake_rows(lake)
    assert len(rows) == 4 and len({(r["sampled_at"], r["gpu_uuid"]) for r in rows}) == 4
    assert not list((tmp_path / "spool").glob("*.arrows")), "nothing left for a restart to replay"


def test_a_killed_writers_temporary_lake_file_is_removed_at_the_next_start_a_live_ones_is_not(tmp_path, lake):
    """A SIGKILL between a lake file's write and its rename left a hidden .parquet.tmp per kill that
    nothing removed (review, helper-88). Its rows are still in the spool; a fresh one may be an
    ingest or a compaction at work beside the collector, and stays."""
    import os
    import time

    folder = lake / "gpu_samples" / "date=2026-01-01" / "host=node-01"
    folder.mkdir(parents=True)
    old, young = folder / ".part-a-1234abcd.parquet.tmp", folder / ".part-b-5678abcd.parquet.tmp"
    for path in (old, young):
        path.write_bytes(b"PAR1")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    recover(tmp_path / "spool", lake)
    assert not old.exists() and young.exists()
