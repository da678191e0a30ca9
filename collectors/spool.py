"""The local spool between sources and the lake: append-only Arrow IPC segments.

Rows are buffered in memory and appended to the open segment `<spool>/<dataset>-<id>.arrows` as
one record batch per flush, then fsynced: a kill -9 loses at most the rows of one flush interval.
A segment is "rolled" into the lake (collectors.writer, atomic Parquet) and then deleted. The lake
file's name is derived from the segment id, so rolling the same segment twice (a crash between the
lake rename and the segment delete) rewrites the same file instead of duplicating rows.

On start, `recover()` rolls every segment a previous process left, reading its batches up to
the first torn one (a write the kill cut short). That is only safe when no other process writes
into the folder: a collector holds the folder with `spool_lock` for as long as it runs, so a second
one on the same folder refuses to start instead of rolling the first one's live segment into its
own lake.
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import logging
import os
import socket
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import conform
from joulehouse.collectors.spool_roll import roll_or_set_aside
from joulehouse.collectors.writer import LakeWriteError, WrittenFile, remove_orphan_temporaries

log = logging.getLogger(__name__)
SEGMENT_SUFFIX = ".arrows"


LOCK_NAME = "collector.lock"  # in the spool folder; no segment glob matches it
MERGE_POLLS = 256  # polls held (a full disk) merged into one table: Spool.append


class SpoolInUseError(RuntimeError):
    """Another process holds the spool folder (spool_lock); the message names it."""


@contextmanager
def spool_lock(spool_dir: Path) -> Iterator[None]:
    """Hold `spool_dir` for this process alone while the block runs: an exclusive flock on the
    folder itself, which the kernel releases when the process ends, however it ends (kill -9
    leaves no stale lock). The holder's pid, host and start time are noted in its LOCK_NAME file
    for the message a second collector gets (SpoolInUseError), where the disk has room for it: the
    lock was the note file's, and on a full disk, where that file could not be made, the
    collector crashed with ENOSPC (every 5 s under systemd) instead of holding its rows in memory."""
    lakefs.makedirs_durably(spool_dir)
    fd = os.open(spool_dir, os.O_RDONLY | os.O_DIRECTORY)
    held = [fd]
    try:
        _lock(spool_dir, fd)
        # A collector of the release before locks the note file, not the folder: it is locked too
        # (opened read-only, which needs no space), before the note is written and once it is
        # there, or two collectors would write one spool at an upgrade.
        note_fd = _lock_note(held, spool_dir)
        started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            with open(Path(spool_dir) / LOCK_NAME, "w", encoding="utf-8") as note:
                note.write(f"pid {os.getpid()} on {socket.gethostname()}, since {started}\n")
        except OSError as exc:  # only a second collector's message reads it
            log.warning("spool folder %s: cannot note this collector in %s (%s)", spool_dir, LOCK_NAME,
                        exc.strerror or exc)
        if note_fd is None:
            _lock_note(held, spool_dir)
        yield
    finally:
        for held_fd in held:
            os.close(held_fd)


def _lock(spool_dir: Path, fd: int) -> None:
    """Take `fd`'s exclusive flock, or say who holds the spool (SpoolInUseError)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SpoolInUseError(f"spool folder {spool_dir} is in use by another collector ({_holder(spool_dir)}); "
                              "run one collector per spool folder (--spool-dir)") from None


def _lock_note(held: list[int], spool_dir: Path) -> int | None:
    """Lock the folder's note file where it exists (its fd, kept in `held` until the spool is let go)."""
    try:
        note_fd = os.open(Path(spool_dir) / LOCK_NAME, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    held.append(note_fd)
    _lock(spool_dir, note_fd)
    return note_fd


def _holder(spool_dir: Path) -> str:
    """Who holds the spool folder, from its note."""
    try:
        return (Path(spool_dir) / LOCK_NAME).read_text(encoding="utf-8", errors="replace").strip() or "unnoted"
    except OSError:
        return "unnoted: its disk was full when it started"


class DiskFullError(OSError):
    """The spool or the lake is out of space; the rows are still held in memory."""


class SegmentReadError(OSError):
    """A spool segment could not be read now (an I/O error, too many open files): it is kept
    where it is and rolled at a later try, never taken for torn or unreadable."""


def read_segment(path: Path) -> pa.Table | None:
    """The whole batches of a segment (a torn last batch is left out); None if it has none.

    The file is read whole before it is parsed: Arrow reports a batch cut short and a failed
    read with the same OSError, so only an error in parsing bytes already in memory counts as a
    torn batch. A failed read raises SegmentReadError and leaves the segment as it is."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SegmentReadError(exc.errno, f"cannot read spool segment {path} ({exc}); kept for a retry") from exc
    batches = []
    try:
        reader = pa.ipc.open_stream(pa.py_buffer(data))
        schema = reader.schema
        while True:
            try:
                batches.append(reader.read_next_batch())
            except StopIteration:
                break
    except (pa.ArrowInvalid, OSError, EOFError) as exc:
        if not batches:
            log.warning("spool segment %s has no readable batch (%s); keeping it aside", path, exc)
            return None
        log.warning("spool segment %s ends in a torn batch (%s); recovered %d batches", path, exc, len(batches))
    if not batches:
        return None
    return pa.Table.from_batches(batches, schema=schema)


@dataclass
class _Segment:
    path: Path
    schema: pa.Schema
    sink: pa.OSFile
    writer: pa.ipc.RecordBatchStreamWriter
    opened_at: float
    rows: int = 0


@dataclass
class Spool:
    """Append-only spool of one dataset. `flush()` every spool_flush_interval_s, `roll()` when
    the segment is older than roll_interval_s or holds roll_max_rows."""

    spool_dir: Path
    lake: Path
    dataset: str
    roll_interval_s: float = 300.0
    roll_max_rows: int = 500_000
    max_buffer_rows: int = 2_000_000
    # The unit's MemoryMax is 256M: rows held while the disk is full must fit well inside it. At
    # ~200 B a row once merged, 64 MiB holds about 12 h of 8 GPUs at 1 Hz.
    max_buffer_bytes: int = 64 << 20
    clock: object = time.monotonic
    _buffer: list[pa.Table] = field(default_factory=list)
    _merged: int = 0  # the buffer's first tables that are merged runs of polls (append)
    _held_bytes: int = 0  # the buffer's bytes, kept as it changes (nbytes of every table each poll cost 10x the poll)
    _segment: _Segment | None = None
    dropped_rows: int = 0
    # Closed segments the lake could not take yet (disk full, a read or write error); retried by roll_pending().
    pending: list[Path] = field(default_factory=list)
    roll_failures: int = 0

    def append(self, table: pa.Table) -> None:
        """Hold rows until the next flush (memory is bounded by max_buffer_rows and
        max_buffer_bytes: past either the oldest rows are dropped and counted, and the log says so).
        Every MERGE_POLLS polls held are merged into one table: one small table a poll cost ~2.7 KB
        a row, so a full disk reached the unit's 256M within hours, far below the row bound, and
        the kernel's kill lost every row held, unsaid."""
        if table.num_rows:
            self._buffer.append(conform(self.dataset, table))
            self._held_bytes += self._buffer[-1].nbytes
        if len(self._buffer) - self._merged >= MERGE_POLLS:
            polls = self._buffer[self._merged:]
            merged = pa.concat_tables(polls, promote_options="permissive").combine_chunks()
            self._held_bytes += merged.nbytes - sum(t.nbytes for t in polls)
            self._buffer[self._merged:] = [merged]
            self._merged += 1
        held = self.buffered_rows
        while (held > self.max_buffer_rows or self._held_bytes > self.max_buffer_bytes) and len(self._buffer) > 1:
            lost = self._buffer.pop(0)
            self._merged = max(self._merged - 1, 0)
            held, self._held_bytes = held - lost.num_rows, self._held_bytes - lost.nbytes
            self.dropped_rows += lost.num_rows
            log.error("spool %s: buffer over %d rows or %d bytes, dropped %d oldest rows", self.dataset,
                      self.max_buffer_rows, self.max_buffer_bytes, lost.num_rows)

    @property
    def buffered_rows(self) -> int:
        return sum(t.num_rows for t in self._buffer)

    def flush(self) -> int:
        """Append buffered rows to the segment and fsync. Returns rows flushed. Raises
        DiskFullError (rows stay buffered) when the disk is full."""
        if not self._buffer:
            return 0
        table = pa.concat_tables(self._buffer, promote_options="permissive")
        kept_bytes = None  # where the segment ended before this flush: what a failure cuts back to
        try:
            if self._segment is not None and self._segment.schema != table.schema:
                self.roll()
            if self._segment is None:
                self._open(table.schema)
            seg = self._segment
            kept_bytes = seg.sink.tell()
            for batch in table.to_batches():
                seg.writer.write_batch(batch)
            seg.sink.flush()
            os.fsync(seg.sink.fileno())
        except OSError as exc:
            self._fail_segment(kept_bytes)
            if getattr(exc, "errno", None) == errno.ENOSPC or "No space" in str(exc):
                raise DiskFullError(errno.ENOSPC, f"spool {self.spool_dir} is full; holding {table.num_rows} rows in memory") from exc
            raise
        self._buffer, self._merged, self._held_bytes = [], 0, 0
        seg.rows += table.num_rows
        return table.num_rows

    def _fail_segment(self, kept_bytes: int | None) -> None:
        """A write failed half way: cut the segment back to what earlier flushes made durable
        (the failed flush's batches may have reached the file: the rows stay buffered and go to a
        fresh segment next time, so leaving them would put them in the lake twice), close it and
        queue it for the next roll."""
        seg, self._segment = self._segment, None
        if seg is None:
            return
        try:
            seg.sink.close()
        except OSError:
            pass
        if kept_bytes is None:
            return  # the failure came before this segment was written to: recovery rolls it as is
        if seg.rows == 0:
            # No flush made rows durable in it: it holds a schema at most. Kept, every retried
            # flush of a full disk would leave one more, renamed .unreadable at the next start.
            seg.path.unlink(missing_ok=True)
            return
        try:
            os.truncate(seg.path, kept_bytes)
        except OSError:
            # Cannot cut it back: leave it to recovery, which rolls its readable batches; the lake
            # may then hold the failed flush's rows twice, which the build quarantines as duplicates.
            log.error("spool %s: could not truncate %s after a failed write", self.dataset, seg.path)
            return
        self.pending.append(seg.path)

    def _open(self, schema: pa.Schema) -> None:
        lakefs.makedirs_durably(self.spool_dir)
        seg_id = f"{time.time_ns():020d}-{uuid.uuid4().hex[:8]}"
        path = self.spool_dir / f"{self.dataset}-{seg_id}{SEGMENT_SUFFIX}"
        sink = pa.OSFile(str(path), "wb")
        try:
            writer = pa.ipc.new_stream(sink, schema)
            lakefs.fsync_dir(self.spool_dir)  # the segment's name survives a power cut, not only its bytes
        except OSError:
            # A full disk takes the file but not its schema: without this, every retried flush
            # would leave one more empty segment behind.
            sink.close()
            path.unlink(missing_ok=True)
            raise
        self._segment = _Segment(path, schema, sink, writer, self.clock())

    def due(self) -> bool:
        seg = self._segment
        return seg is not None and (seg.rows >= self.roll_max_rows or self.clock() - seg.opened_at >= self.roll_interval_s)

    def roll(self) -> list[WrittenFile]:
        """Close the segment, write it to the lake, delete it. The segment is queued before it is
        closed: when the close fails (a full disk refusing the stream's end marker) its rows, fsynced
        by the flushes, are still pending and rolled at the next try (read_segment needs no end
        marker), and its file is closed all the same."""
        seg, self._segment = self._segment, None
        if seg is None:
            return []
        self.pending.append(seg.path)
        try:
            seg.writer.close()
        except OSError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFullError(errno.ENOSPC, f"spool {self.spool_dir} is full; segment {seg.path.name} "
                                    "kept for the next roll") from exc
            raise
        finally:
            try:
                seg.sink.close()
            except OSError as exc:  # its rows were fsynced: they are rolled from the file as it is
                log.warning("spool %s: closing %s failed (%s)", self.dataset, seg.path.name, exc)
        return self.roll_pending()

    def roll_pending(self) -> list[WrittenFile]:
        """Roll closed segments into the lake; raises DiskFullError and keeps them if it is full.
        A segment that cannot be read or written now stays pending (counted in roll_failures,
        logged) and the others are still rolled: one bad segment does not hold back the rest."""
        written = []
        for path in list(self.pending):
            try:
                written += roll_segment_file(path, self.lake, self.dataset)
            except (SegmentReadError, LakeWriteError) as exc:
                self.roll_failures += 1
                if self.roll_failures == 1 or self.roll_failures % 100 == 0:
                    log.error("spool %s: %s; kept, retried at every flush (%d failures)",
                              self.dataset, exc, self.roll_failures)
                continue
            self.pending.remove(path)
        return written

    def close(self) -> list[WrittenFile]:
        """Flush and roll everything (a clean stop)."""
        self.flush()
        return self.roll()


def roll_segment_file(path: Path, lake: Path, dataset: str) -> list[WrittenFile]:
    table = read_segment(path)
    written = []
    if table is not None and table.num_rows:
        try:
            written = roll_or_set_aside(path, lake, dataset, table, path.name[len(dataset) + 1:-len(SEGMENT_SUFFIX)])
        except LakeWriteError as exc:
            if exc.errno == errno.ENOSPC:
                raise DiskFullError(errno.ENOSPC, f"lake {lake} is full; segment {path} kept for later") from exc
            raise
    elif table is None and path.stat().st_size > 0:
        path.rename(path.with_suffix(".unreadable"))
        return []
    path.unlink(missing_ok=True)
    return written


def recover(spool_dir: Path, lake: Path, left: dict[str, list[Path]] | None = None) -> list[WrittenFile]:
    """Roll every segment a previous process left in `spool_dir` into the lake. A segment that
    cannot be read or written now (an I/O error, a full or unwritable lake) stays in place, is
    logged, and is added to `left[dataset]` for the caller to retry; the others are still rolled.
    First, the temporary files writers killed mid-write left in the lake and the spool are removed."""
    remove_orphan_temporaries(lake)
    for partial in Path(spool_dir).glob(".*.rejected.*.tmp"):  # a set-aside cut short: its segment is still there
        partial.unlink(missing_ok=True)
    written = []
    for path in sorted(Path(spool_dir).glob(f"*{SEGMENT_SUFFIX}")):
        dataset = path.name.split("-", 1)[0]
        try:
            rolled = roll_segment_file(path, lake, dataset)
        except (SegmentReadError, LakeWriteError, DiskFullError) as exc:
            log.error("spool segment %s kept for a retry: %s", path.name, exc)
            if left is not None:
                left.setdefault(dataset, []).append(path)
            continue
        written += rolled
        log.info("recovered spool segment %s: %d rows into the lake", path.name, sum(f.rows for f in rolled))
    return written
