"""The node collector loop: sources -> spool -> rolled, immutable Parquet in the lake.

Every `interval_s` each source is read; its rows go to its dataset's spool, which is fsynced
every `spool_flush_interval_s` (a kill -9 loses at most that much) and rolled into the lake every
`roll_interval_s` or `roll_max_rows`. A source that fails logs why and the others go on; a read
whose every row carries an `error` (a BMC that does not answer) is counted as failed, its rows
kept. A full
disk (or a spool that stopped taking writes) is logged as such; rows stay in memory (bounded) and
the loop retries each flush. On stop (SIGTERM/SIGINT set `stop`) everything is flushed and rolled,
and the stats count the rows that could not be kept (`rows_not_kept`: the disk was still full)
and the segments left for the next start. On start the collector takes the spool folder for
itself (a second collector on it stops with SpoolInUseError), checks that the spool and the lake
can be written (StorageError otherwise: read-only, no permission), and recovers into the lake the
segments a previous process left.

Slow sources (IPMI: one ipmitool call can wait seconds for a BMC; DCGM: a Prometheus range
query, retried with backoff) run as `Scheduled(..., background=True)` (collectors/collect_schedule.py):
each in its own thread at its own interval, handing rows to the loop through a bounded queue, so
a stalled BMC never delays a GPU sample. A source marked `required` (NVML) that cannot be read on
the first poll stops the collector with SourceStartError: a node without a working driver should
say so once, not log the same failure every second.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from joulehouse.collectors import lakefs
from joulehouse.collectors.collect_schedule import Scheduled, check_intervals
from joulehouse.collectors.collect_schedule import parse_duration_s  # noqa: F401 - the CLI imports it from here
from joulehouse.collectors.collect_stats import CollectStats
from joulehouse.collectors.lake_locks import source_locks
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.base import Source, SourceError, read_failure
from joulehouse.collectors.spool import SEGMENT_SUFFIX, DiskFullError, Spool, recover, spool_lock

log = logging.getLogger(__name__)


# Tables a background source may hold for the loop before its oldest are dropped (and logged).
BACKGROUND_QUEUE_TABLES = 1000


class SourceStartError(RuntimeError):
    """A required source could not be read at all on the first poll; the message says why."""


class StorageError(RuntimeError):
    """The lake or the spool folder cannot be written (read-only, no permission, not a folder): the
    collector does not start; segments already in the spool stay for the next start."""


class Collector:
    """Polls `sources` into spools under `spool_dir` and rolls them into `lake`."""

    def __init__(self, sources: Sequence[Source | Scheduled], *, lake: str | Path, settings: CollectorSettings,
                 spool_dir: str | Path | None = None, clock: Callable[[], float] = time.monotonic,
                 wait: Callable[[threading.Event, float], object] = threading.Event.wait):
        """`clock` (monotonic seconds) and `wait(stop, seconds)` (sleep until then or until `stop`
        is set) pace the loop; tests inject both to run it without the machine's speed mattering.
        Raises ValueError naming an interval that is not a finite number of seconds above zero."""
        self.scheduled = [s if isinstance(s, Scheduled) else Scheduled(s) for s in sources]
        check_intervals(settings, self.scheduled)
        self.sources = [s.source for s in self.scheduled]
        self.lake = Path(lake)
        self.settings = settings
        # the argument, else [collector] spool_dir, else beside the lake
        self.spool_dir = Path(spool_dir if spool_dir is not None else settings.spool_dir or Path(lake).parent / "spool")
        self.clock, self._wait = clock, wait
        self.stats = CollectStats()
        self._spools: dict[str, Spool] = {}
        self._last_flush = clock()
        self._write_blocked = False
        self._inbox: queue.Queue[tuple[str, str, pa.Table]] = queue.Queue(maxsize=BACKGROUND_QUEUE_TABLES)
        self._stats_lock = threading.Lock()

    def _spool(self, dataset: str) -> Spool:
        if dataset not in self._spools:
            self._spools[dataset] = Spool(self.spool_dir, self.lake, dataset,
                                          roll_interval_s=self.settings.roll_interval_s,
                                          roll_max_rows=self.settings.roll_max_rows, clock=self.clock)
        return self._spools[dataset]

    def written_totals(self) -> tuple[int, int]:
        """(rows, files) that reached the lake: through the spool, and by the sources that write
        their own files (DCGM and the links: Prometheus is their spool)."""
        rows, files = self.stats.rows, self.stats.files_written
        for entry in self.scheduled:
            rows += getattr(entry.source, "rows_written_total", 0)
            files += getattr(entry.source, "files_written_total", 0)
        return rows, files

    def spools(self) -> list[Spool]:
        """The spools opened so far, one per dataset (read by the metrics at each scrape)."""
        return list(self._spools.values())

    def _wrote(self, files: int) -> None:
        if files:
            self.stats.files_written += files
            self.stats.last_lake_write_at_s = time.time()

    def recover(self) -> int:
        """Roll what a previous (killed) process left in the spool; returns files written. A
        segment that cannot be rolled now is retried at every flush, as a full disk's are."""
        left: dict[str, list[Path]] = {}
        written = recover(self.spool_dir, self.lake, left)
        self.stats.rows_recovered += sum(f.rows for f in written)
        self.stats.files_recovered += len(written)
        for dataset, paths in left.items():
            self._spool(dataset).pending.extend(paths)
        self._wrote(len(written))
        return len(written)

    def _read(self, entry: Scheduled) -> pa.Table | None:
        """One read of one source; a failure is logged and counted, and gives None."""
        try:
            table = entry.source.read()
        except SourceError as exc:
            self._count_error(entry)
            log.warning("source %s failed this poll: %s", entry.name, exc)
            return None
        except Exception:  # a bug in one source must not stop the others
            self._count_error(entry)
            log.exception("source %s raised unexpectedly this poll", entry.name)
            return None
        return self._judged(entry, table)

    def _judged(self, entry: Scheduled, table: pa.Table) -> pa.Table:
        """Count a read as good, or as a source error when every row of it carries an error."""
        failure = read_failure(table)
        if failure is not None:
            # IPMI never raises for a dead BMC (its row keeps the reason), nor NVML for GPUs all
            # lost: uncounted, the source-error metric and "no source could be read" would call
            # them healthy.
            self._count_error(entry)
            log.warning("source %s failed this poll: %s (its rows are kept with the reason)", entry.name, failure)
            return table
        with self._stats_lock:
            self.stats.reads_ok += 1
        return table

    def _count_error(self, entry: Scheduled) -> None:
        with self._stats_lock:
            self.stats.source_errors += 1
            self.stats.errors_by_source[entry.label] = self.stats.errors_by_source.get(entry.label, 0) + 1

    def _first_read(self, entry: Scheduled) -> pa.Table:
        """The first read of a required source: if it cannot be read at all, stop (SourceStartError)."""
        try:
            table = entry.source.read()
        except SourceError as exc:
            raise SourceStartError(str(exc)) from exc
        entry.started = True  # it answered: a GPU lost at start may come back, so the run goes on
        return self._judged(entry, table)

    def _take(self, label: str, dataset: str, table: pa.Table) -> None:
        self._spool(dataset).append(table)
        self.stats.rows += table.num_rows
        key = (label, dataset)
        self.stats.rows_by_source[key] = self.stats.rows_by_source.get(key, 0) + table.num_rows

    def poll(self) -> None:
        """Take what background sources read, read every due foreground source, then flush and
        roll what is due."""
        self.stats.polls += 1
        self._drain_inbox()
        now = self.clock()
        for entry in self.scheduled:
            if entry.background:
                continue
            if entry.interval_s is not None:  # a slower foreground source: read when due
                if now < entry.next_at:
                    continue
                entry.next_at = max(entry.next_at + entry.interval_s, now)
            table = self._first_read(entry) if entry.required and not entry.started else self._read(entry)
            if table is not None:
                self._take(entry.label, entry.source.dataset, table)
        if self.clock() - self._last_flush >= self.settings.spool_flush_interval_s:
            self.flush(roll_due_only=True)

    def _background(self, entry: Scheduled, stop: threading.Event) -> None:
        """Read `entry` every interval until `stop`; hand rows to the loop (bounded queue)."""
        interval = entry.interval_s or self.settings.interval_s
        while not stop.is_set():
            started = time.monotonic()
            table = self._read(entry)
            if table is not None and table.num_rows:
                try:
                    self._inbox.put_nowait((entry.label, entry.source.dataset, table))
                except queue.Full:
                    with self._stats_lock:
                        self.stats.background_dropped_tables += 1
                    log.error("source %s: the collect loop is %d tables behind; dropped this read",
                              entry.name, BACKGROUND_QUEUE_TABLES)
            stop.wait(max(0.0, interval - (time.monotonic() - started)))

    def flush(self, *, roll_due_only: bool = False) -> None:
        """Flush every spool (fsync) and roll those due (or all). Disk full: log, keep, go on."""
        self._last_flush = self.clock()
        try:
            self._flush_spools(roll_due_only)
        finally:
            self.stats.roll_failures = sum(spool.roll_failures for spool in self._spools.values())

    def _flush_spools(self, roll_due_only: bool) -> None:
        for spool in self._spools.values():
            try:
                spool.flush()
                if spool.pending:
                    self._wrote(len(spool.roll_pending()))
                if not roll_due_only or spool.due():
                    self._wrote(len(spool.roll()))
                if self._write_blocked:
                    log.warning("the spool takes writes again: spool %s flushed", spool.dataset)
                    self._write_blocked = False
            except DiskFullError as exc:
                self.stats.disk_full_events += 1
                if not self._write_blocked:
                    log.error("DISK FULL: %s; %d rows held in memory, retrying every flush", exc, spool.buffered_rows)
                self._write_blocked = True
            except OSError as exc:  # read-only, I/O error: the rows stay in memory, as on a full disk
                self.stats.write_errors += 1
                if not self._write_blocked:
                    log.error("SPOOL NOT WRITABLE: %s; %d rows held in memory, retrying every flush",
                              exc, spool.buffered_rows)
                self._write_blocked = True

    def run(self, stop: threading.Event, *, max_polls: int | None = None) -> CollectStats:
        """Take the spool folder (spool_lock), recover, start the background sources, poll every
        interval_s until `stop` is set (or max_polls), then flush and roll all. Raises
        SpoolInUseError when another collector holds the spool (SourceInUseError when another
        writes one of its sources into the lake), StorageError when the spool or the
        lake cannot be written, SourceStartError when a required source fails its first read
        (after flushing what the others gave). The stats say what could not be kept at stop."""
        _check_writable(self.spool_dir, "spool folder")
        if not self.spool_dir.is_dir():  # a full disk at the very first start: nowhere to spool, nothing to hold
            raise StorageError(f"spool folder {self.spool_dir} cannot be created (no space left on its disk?): "
                               "the collector cannot start")
        with spool_lock(self.spool_dir):
            _check_writable(self.lake, "lake")
            with source_locks(self.lake, (s.label for s in self.scheduled)):
                return self._run_locked(stop, max_polls)

    def _run_locked(self, stop: threading.Event, max_polls: int | None) -> CollectStats:
        self.recover()
        background_stop = threading.Event()
        threads: list[threading.Thread] = []
        background_started = False
        try:
            next_at = self.clock()
            while not stop.is_set() and (max_polls is None or self.stats.polls < max_polls):
                self.poll()
                if not background_started:  # after the first poll: required sources have started
                    threads, background_started = self._start_background(background_stop), True
                next_at += self.settings.interval_s
                late_s = self.clock() - next_at
                if late_s > 0:
                    # A poll (or a disk stall) overran whole intervals: start again from now rather
                    # than fire the missed polls back to back, which would sample the same instant.
                    next_at += math.ceil(late_s / self.settings.interval_s) * self.settings.interval_s
                    self.stats.late_polls += 1
                self._wait(stop, max(0.0, next_at - self.clock()))
        finally:
            background_stop.set()
            for thread in threads:
                # A source mid-call (an ipmitool timeout, a Prometheus retry) gets its bound to finish.
                thread.join(timeout=30.0)
            self._drain_inbox()
            self.flush()
            self._count_left()
            for source in self.sources:
                source.close()
        return self.stats

    def _count_left(self) -> None:
        """What the final flush could not keep (rows) and what waits in the spool (segments)."""
        self.stats.rows_not_kept = sum(sp.buffered_rows + sp.dropped_rows for sp in self._spools.values())
        try:
            self.stats.segments_left = sum(1 for _ in self.spool_dir.glob(f"*{SEGMENT_SUFFIX}"))
        except OSError:
            self.stats.segments_left = sum(len(sp.pending) for sp in self._spools.values())
        if self.stats.rows_not_kept:
            log.error("stopping with %d rows that could not be written to %s (see DISK FULL / SPOOL NOT WRITABLE "
                      "above): they are lost", self.stats.rows_not_kept, self.spool_dir)

    def _start_background(self, stop: threading.Event) -> list[threading.Thread]:
        threads = []
        for entry in self.scheduled:
            if entry.background:
                thread = threading.Thread(target=self._background, args=(entry, stop),
                                          name=f"collect-{entry.name}", daemon=True)
                thread.start()
                threads.append(thread)
        return threads

    def _drain_inbox(self) -> None:
        """Move what the background sources read into the spools (only this thread touches them)."""
        while True:
            try:
                label, dataset, table = self._inbox.get_nowait()
            except queue.Empty:
                return
            self._take(label, dataset, table)


def _check_writable(folder: Path, what: str) -> None:
    """Create `folder` if needed and a file in it, or raise StorageError naming it and why. A full
    disk is not refused here: the loop holds rows in memory until space comes back."""
    probe = folder / f".write-probe-{os.getpid()}"
    try:
        lakefs.makedirs_durably(folder)
        probe.touch()
        probe.unlink()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            log.error("DISK FULL at start: %s %s: %s", what, folder, exc)
            return
        kept = sum(1 for _ in folder.glob(f"*{SEGMENT_SUFFIX}")) if what == "spool folder" and folder.is_dir() else 0
        left = f"; its {kept} segments stay for the next start" if kept else ""
        raise StorageError(f"{what} {folder} is not writable ({exc.strerror or exc}): the collector "
                           f"cannot start{left}") from None

