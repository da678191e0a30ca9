"""The node collector loop: sources -> spool -> rolled, immutable Parquet in the lake.

Every `interval_s` each source is read; its rows go to its dataset's spool, which is fsynced
every `spool_flush_interval_s` (a kill -9 loses at most that much) and rolled into the lake every
`roll_interval_s` or `roll_max_rows`. A source that fails logs why and the others go on. A full
disk is logged as such; rows stay in memory (bounded) and the loop retries each flush. On stop
(SIGTERM/SIGINT set `stop`) everything is flushed and rolled. On start, segments a previous
process left are recovered into the lake first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from collectors.settings import CollectorSettings
from collectors.sources.base import Source, SourceError
from collectors.spool import DiskFullError, Spool, recover

log = logging.getLogger(__name__)


@dataclass
class CollectStats:
    polls: int = 0
    rows: int = 0
    source_errors: int = 0
    files_written: int = 0
    disk_full_events: int = 0


class Collector:
    """Polls `sources` into spools under `spool_dir` and rolls them into `lake`."""

    def __init__(self, sources: Sequence[Source], *, lake: str | Path, settings: CollectorSettings,
                 spool_dir: str | Path | None = None, clock: Callable[[], float] = time.monotonic):
        self.sources = list(sources)
        self.lake = Path(lake)
        self.settings = settings
        self.spool_dir = Path(spool_dir if spool_dir is not None else settings.spool_dir)
        self.clock = clock
        self.stats = CollectStats()
        self._spools: dict[str, Spool] = {}
        self._last_flush = clock()
        self._disk_full = False

    def _spool(self, dataset: str) -> Spool:
        if dataset not in self._spools:
            self._spools[dataset] = Spool(self.spool_dir, self.lake, dataset,
                                          roll_interval_s=self.settings.roll_interval_s,
                                          roll_max_rows=self.settings.roll_max_rows, clock=self.clock)
        return self._spools[dataset]

    def recover(self) -> int:
        """Roll what a previous (killed) process left in the spool; returns files written."""
        written = recover(self.spool_dir, self.lake)
        self.stats.files_written += len(written)
        return len(written)

    def poll(self) -> None:
        """Read every source once, then flush and roll what is due."""
        self.stats.polls += 1
        for source in self.sources:
            try:
                table = source.read()
            except SourceError as exc:
                self.stats.source_errors += 1
                log.warning("source %s failed this poll: %s", type(source).__name__, exc)
                continue
            self._spool(source.dataset).append(table)
            self.stats.rows += table.num_rows
        if self.clock() - self._last_flush >= self.settings.spool_flush_interval_s:
            self.flush(roll_due_only=True)

    def flush(self, *, roll_due_only: bool = False) -> None:
        """Flush every spool (fsync) and roll those due (or all). Disk full: log, keep, go on."""
        self._last_flush = self.clock()
        for spool in self._spools.values():
            try:
                spool.flush()
                if spool.pending:
                    self.stats.files_written += len(spool.roll_pending())
                if not roll_due_only or spool.due():
                    self.stats.files_written += len(spool.roll())
                if self._disk_full:
                    log.warning("disk space is back: spool %s flushed", spool.dataset)
                    self._disk_full = False
            except DiskFullError as exc:
                self.stats.disk_full_events += 1
                if not self._disk_full:
                    log.error("DISK FULL: %s; %d rows held in memory, retrying every flush", exc, spool.buffered_rows)
                self._disk_full = True

    def run(self, stop: threading.Event, *, max_polls: int | None = None) -> CollectStats:
        """Poll every interval_s until `stop` is set (or max_polls), then flush and roll all."""
        self.recover()
        next_at = self.clock()
        try:
            while not stop.is_set() and (max_polls is None or self.stats.polls < max_polls):
                self.poll()
                next_at += self.settings.interval_s
                stop.wait(max(0.0, next_at - self.clock()))
        finally:
            self.flush()
            for source in self.sources:
                source.close()
        return self.stats


def parse_duration_s(text: str) -> float:
    """'1s', '500ms', '2m', '1.5' (seconds) -> seconds."""
    text = text.strip().lower()
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            number = text[: -len(suffix)]
            break
    else:
        number, scale = text, 1.0
    try:
        value = float(number) * scale
    except ValueError:
        raise ValueError(f"duration {text!r}: expected a number with ms, s, m or h (e.g. '1s')") from None
    if value <= 0:
        raise ValueError(f"duration {text!r}: expected more than zero")
    return value
