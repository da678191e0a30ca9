"""How often the collect loop (collectors/collect.py) reads each source, and the durations it is
given: `Scheduled` (a source with its own interval, read in its own thread or required to answer
its first read), the check that refuses an interval that is not a finite number of seconds above
zero, and `parse_duration_s`, which reads a command line's '1s' or '500ms'."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.base import Source


@dataclass
class Scheduled:
    """A source with its own read interval (seconds; None: the loop's interval_s). `background`
    reads it in its own thread; `required` stops the collector if its first read fails."""

    source: Source
    interval_s: float | None = None
    background: bool = False
    required: bool = False
    next_at: float = field(default=float("-inf"), repr=False)
    started: bool = field(default=False, repr=False)

    @property
    def name(self) -> str:
        return type(self.source).__name__

    @property
    def label(self) -> str:
        """The source as the metrics name it: NvmlSource -> nvml, GpuProcessSource -> gpuprocess."""
        return self.name.removesuffix("Source").lower()


def check_intervals(settings: CollectorSettings, scheduled: Sequence[Scheduled]) -> None:
    """Refuse an interval that is not a finite number of seconds above zero: NaN compares false
    with everything, so the loop would poll without pause (about 2,000 polls a second); infinity
    overflows the wait; zero divides the catch-up step."""
    intervals = {name: getattr(settings, name) for name in (
        "interval_s", "spool_flush_interval_s", "roll_interval_s", "ipmi_interval_s", "dcgm_sync_interval_s",
        "process_map_interval_s")}
    intervals.update({f"{entry.name} interval_s": entry.interval_s for entry in scheduled if entry.interval_s is not None})
    for name, value in intervals.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"collector {name} = {value!r}: expected a finite number of seconds above zero")


def parse_duration_s(text: str, name: str = "duration") -> float:
    """'1s', '500ms', '2m', '1.5' (seconds) -> seconds; `name` (the option it came from) leads the
    error so a command line with several durations says which one is wrong."""
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
        raise ValueError(f"{name} {text!r}: expected a number with ms, s, m or h (e.g. '1s')") from None
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} {text!r}: expected a finite time above zero")
    return value
