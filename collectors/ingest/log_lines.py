"""What reading a log line by line keeps track of: whether its last line ended (a line being
written, or cut short, has no line end), and which readings it has seen lately (duplicates).
Pure Python: the node side installs without numpy."""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Iterator
from datetime import datetime, timedelta, timezone

_EPOCH, _US = datetime(1970, 1, 1, tzinfo=timezone.utc), timedelta(microseconds=1)


class LineEnds:
    """The lines of a log, saying whether the last one read ended without a line end (`cut`)."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines, self.cut = lines, False

    def __iter__(self) -> "LineEnds":
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.cut = not line.endswith(("\n", "\r"))
        return line


class RecentReadings:
    """The (GPU, instant) keys of a log's readings of the last `window_s` before its latest one:
    a duplicate is a key seen again. Older keys are forgotten (the nvidia-smi importer's docstring), so memory is
    bounded by the window; `unchecked` counts the rows that came too far back to check."""

    def __init__(self, window_s: float) -> None:
        self._window_us = round(window_s * 1e6)
        self._keys: set[tuple[int, Hashable]] = set()
        self._by_time: list[tuple[int, Hashable]] = []  # a heap of the same keys, oldest first
        self._latest_us: int | None = None
        self.unchecked = 0

    def add(self, gpu: Hashable, at: datetime) -> bool:
        """False when `gpu` already has a reading at `at` (UTC); else True, and the reading is kept."""
        at_us = (at - _EPOCH) // _US
        key = (at_us, gpu)
        if key in self._keys:
            return False
        if self._latest_us is not None and at_us < self._latest_us - self._window_us:
            self.unchecked += 1
            return True
        self._keys.add(key)
        heapq.heappush(self._by_time, key)
        if self._latest_us is None or at_us > self._latest_us:
            self._latest_us = at_us
            while self._by_time[0][0] < at_us - self._window_us:
                self._keys.discard(heapq.heappop(self._by_time))
        return True
