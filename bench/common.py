"""What every benchmark section shares: a result row, timing and peak-memory helpers."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Figure:
    """One measured figure beside its same-run baseline. `target` says what good looks like."""

    section: str
    metric: str
    value: float
    unit: str
    baseline_name: str = ""
    baseline_value: float | None = None
    target: str = ""

    @property
    def ratio(self) -> float | None:
        if self.baseline_value in (None, 0):
            return None
        return self.value / self.baseline_value


@dataclass
class BenchContext:
    """Scratch folder and size knobs for one `make bench` run (--quick makes everything small;
    --scaling adds the pipeline at a quarter and four times the fleet)."""

    work_dir: Path
    quick: bool = False
    scaling: bool = False


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Wall seconds of one call, and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def cpu_timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """CPU seconds (user + system) this process spent in one call, and its result."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = fn()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), result


def dir_bytes(path: Path, pattern: str = "*") -> int:
    return sum(p.stat().st_size for p in Path(path).rglob(pattern) if p.is_file())
