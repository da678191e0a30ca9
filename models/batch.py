"""The batch size with the best throughput per watt (eta = TP / P) from a measured batch sweep.

A batch sweep holds, per workload and batch size (and power limit), the time to do a fixed amount
of work (an epoch, or N requests) and the average power while doing it (Zeus's NSDI'23 summary
format: dataset, network, batch_size, optimizer, power_limit, time_per_epoch, average_power).
Throughput is work / time, so with the same work per row eta = 1 / (time x power) = 1 / energy:
the batch size with the highest eta is the one with the least energy per unit of work.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from joulehouse.collectors.input_file import text_lines

REQUIRED = ("batch_size", "power_limit", "time_per_epoch", "average_power")
# A sweep's lines are tens of characters: a longer line is not a sweep, refused there, not read whole.
MAX_LINE_CHARS = 65_536


class BatchSweepError(ValueError):
    """A batch sweep file lacks a column, or a row carries a value that is not a positive number."""


@dataclass(frozen=True)
class BatchPoint:
    batch_size: int
    power_limit_w: float
    time_s: float
    avg_power_w: float

    @property
    def energy_j(self) -> float:
        return self.time_s * self.avg_power_w

    @property
    def eta_per_kj(self) -> float:
        """Units of work (epochs, request batches) per kJ: throughput per watt, per 1000."""
        return 1000.0 / self.energy_j


@dataclass(frozen=True)
class BatchChoice:
    workload: str
    power_limit_w: float
    batch_size: int
    eta_per_kj: float
    energy_j: float
    time_s: float
    # eta of the best batch size over eta of the worst one at the same power limit.
    gain_over_worst_ratio: float
    batch_sizes_compared: int


def load_batch_sweeps(path: str | Path) -> dict[str, list[BatchPoint]]:
    """Workload label (dataset/network/optimizer) -> its measured points."""
    path = Path(path)
    with text_lines(path, "batch sweep", MAX_LINE_CHARS, BatchSweepError) as lines:
        reader = csv.DictReader(lines)
        try:
            return _points(reader, path)
        except (csv.Error, UnicodeDecodeError) as exc:  # a quote never closed, bytes that are not text
            raise BatchSweepError(f"batch sweep {path}: line {reader.line_num} is not CSV text ({exc})") from None


def _points(reader: csv.DictReader, path: Path) -> dict[str, list[BatchPoint]]:
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise BatchSweepError(f"{path}: missing columns {missing}; a batch sweep needs {list(REQUIRED)}")
    sweeps: dict[str, list[BatchPoint]] = {}
    for line, row in enumerate(reader, start=2):
        label = "/".join(row[c] for c in ("dataset", "network", "optimizer") if row.get(c))
        try:
            point = BatchPoint(int(row["batch_size"]), float(row["power_limit"]), float(row["time_per_epoch"]),
                               float(row["average_power"]))
        except (TypeError, ValueError):  # TypeError: a short row leaves a field None
            raise BatchSweepError(f"{path}:{line}: not a number in {dict((c, row[c]) for c in REQUIRED)}") from None
        if min(point.batch_size, point.time_s, point.avg_power_w) <= 0:
            raise BatchSweepError(f"{path}:{line}: batch size, time and power must be positive")
        sweeps.setdefault(label or path.stem, []).append(point)
    return sweeps


def best_batch_size(workload: str, points: list[BatchPoint], power_limit_w: float | None = None) -> BatchChoice:
    """The batch size with the highest eta at `power_limit_w` (default: the highest limit measured,
    i.e. the GPU as it ships)."""
    if not points:
        raise BatchSweepError(f"{workload}: no measured points")
    limit = max(p.power_limit_w for p in points) if power_limit_w is None else power_limit_w
    at_limit = [p for p in points if p.power_limit_w == limit]
    if not at_limit:
        limits = sorted({p.power_limit_w for p in points})
        raise BatchSweepError(f"{workload}: no points at {limit} W; measured limits are {limits}")
    best = max(at_limit, key=lambda p: (p.eta_per_kj, -p.batch_size))
    worst = min(at_limit, key=lambda p: p.eta_per_kj)
    return BatchChoice(workload, limit, best.batch_size, best.eta_per_kj, best.energy_j, best.time_s,
                       best.eta_per_kj / worst.eta_per_kj, len({p.batch_size for p in at_limit}))
