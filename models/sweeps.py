"""Measured power-limit and clock sweeps (Zeus formats) and the limit they call for.

Formats in ../shared/data/sweeps, recognised by their columns:
- Zeus test profiles (`start_time, window_name, elapsed_time, gpu0_energy`): one profiling window
  per limit, window_name `__GlobalPowerLimitOptimizer_<W>`, elapsed_time s, gpu0_energy J.
  Where one limit has several windows, their mean is used (a window is a fixed number of
  iterations; Zeus's optimizer likewise keeps one time and energy per limit).
- Zeus NSDI'23 summaries (`dataset, network, batch_size, optimizer, power_limit, time_per_epoch,
  average_power`): one sweep per workload; energy per epoch = time_per_epoch x average_power.
- Perseus stage profiles (`stage, instruction, frequency, time, energy`): SM clock (MHz) sweeps;
  summed over stages and forward/backward, one iteration's time (s) and energy (J) per clock.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

OBJECTIVES = ("energy", "cost", "time")
_WINDOW = re.compile(r"_(\d+(?:\.\d+)?)$")


class SweepError(ValueError):
    """A sweep file that is not in a known format, or a sweep with nothing to choose from."""


@dataclass(frozen=True)
class Sweep:
    """One workload's sweep: per setting (power limit W, or SM clock MHz) time s and energy J."""

    label: str
    setting: str  # "power_limit_w" | "sm_clock_mhz"
    values: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray

    @property
    def average_power_w(self) -> np.ndarray:
        return self.energy_j / self.time_s


@dataclass(frozen=True)
class Choice:
    """The chosen setting and what it costs relative to the highest one."""

    label: str
    objective: str
    setting: str
    chosen: float
    time_s: float
    energy_j: float
    slowdown_pct: float
    energy_saving_pct: float
    candidates: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line number in the file where the row ends, row) for each CSV row; DictReader skips blank
    lines and a quoted field may span lines, so the number is the reader's, not a count."""
    rows = []
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            for row in reader:
                if None in row:  # DictReader files the fields past the header under the key None
                    raise SweepError(f"sweep file {path}, line {reader.line_num}: {len(reader.fieldnames or [])} "
                                     f"columns in the header, more fields in this row: not a sweep CSV")
                rows.append((reader.line_num, {k.strip(): (v or "").strip() for k, v in row.items()}))
    except (UnicodeDecodeError, csv.Error) as exc:
        raise SweepError(f"sweep file {path} is not a readable CSV: {exc}") from None
    return rows


def _sweep(label: str, setting: str, groups: dict[float, list[tuple[float, float]]]) -> Sweep:
    values = np.array(sorted(groups))
    time_s = np.array([np.mean([t for t, _ in groups[v]]) for v in values])
    energy_j = np.array([np.mean([e for _, e in groups[v]]) for v in values])
    return Sweep(label, setting, values, time_s, energy_j)


def _number(row: dict[str, str], column: str, path: Path, line: int) -> float:
    """`row[column]` as a finite float, or SweepError naming the file, line and column."""
    try:
        value = float(row[column])
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise SweepError(f"sweep file {path}, line {line}: {column} = {row[column]!r} is not a finite number")
    return value


def load_sweeps(path: str | Path) -> dict[str, Sweep]:
    """All sweeps in one file, keyed by a workload label; raises SweepError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"sweep file {path} does not exist")
    rows = _rows(path)
    if not rows:
        raise SweepError(f"sweep file {path} has no rows")
    columns = set(rows[0][1])
    groups: dict[str, dict[float, list[tuple[float, float]]]] = {}
    if {"window_name", "elapsed_time", "gpu0_energy"} <= columns:
        for line, row in rows:
            match = _WINDOW.search(row["window_name"])
            if not match:
                continue  # a window that is not a power-limit probe (e.g. a user's own window)
            groups.setdefault(path.stem, {}).setdefault(float(match.group(1)), []).append(
                (_number(row, "elapsed_time", path, line), _number(row, "gpu0_energy", path, line)))
        setting = "power_limit_w"
    elif {"power_limit", "time_per_epoch", "average_power"} <= columns:
        for line, row in rows:
            label = "/".join(row[k] for k in ("dataset", "network", "batch_size", "optimizer") if k in row)
            t = _number(row, "time_per_epoch", path, line)
            groups.setdefault(label, {}).setdefault(_number(row, "power_limit", path, line), []).append(
                (t, t * _number(row, "average_power", path, line)))
        setting = "power_limit_w"
    elif {"frequency", "time", "energy"} <= columns:
        per_clock: dict[float, list[float]] = {}
        for line, row in rows:
            acc = per_clock.setdefault(_number(row, "frequency", path, line), [0.0, 0.0])
            acc[0] += _number(row, "time", path, line)
            acc[1] += _number(row, "energy", path, line)
        groups[path.stem] = {f: [(t, e)] for f, (t, e) in per_clock.items()}
        setting = "sm_clock_mhz"
    else:
        raise SweepError(f"sweep file {path}: columns {sorted(columns)} match no known sweep format "
                         "(Zeus profile window_name/elapsed_time/gpu0_energy, Zeus summary "
                         "power_limit/time_per_epoch/average_power, or Perseus frequency/time/energy)")
    if not groups:
        raise SweepError(f"sweep file {path}: no power-limit windows found")
    return {label: _sweep(label, setting, g) for label, g in groups.items()}


def load_sweep(path: str | Path, label: str | None = None) -> Sweep:
    """The one sweep in `path` (or the one named `label` in a multi-workload file)."""
    sweeps = load_sweeps(path)
    if label is None:
        if len(sweeps) != 1:
            raise SweepError(f"sweep file {path} holds {len(sweeps)} workloads; name one of {sorted(sweeps)[:5]}...")
        return next(iter(sweeps.values()))
    if label not in sweeps:
        raise SweepError(f"sweep file {path} has no workload {label!r}; it has {sorted(sweeps)[:5]}...")
    return sweeps[label]


def choose_power_limit(sweep: Sweep, objective: str = "energy", eta: float = 0.5,
                       max_slowdown_pct: float | None = None, max_power_w: float | None = None) -> Choice:
    """Pick the setting that minimises the objective over the measured points.

    energy: energy per unit of work (J). time: time (s). cost (Zeus): eta*energy +
    (1 - eta)*max_power_w*time, max_power_w defaulting to the sweep's highest power limit (Zeus uses
    the device's maximum limit). max_slowdown_pct keeps only settings whose time is within that
    percentage of the time at the highest setting (Zeus's MaxSlowdownConstraint).
    """
    if objective not in OBJECTIVES:
        raise SweepError(f"objective {objective!r} is not one of {OBJECTIVES}")
    if not 0.0 <= eta <= 1.0:
        raise SweepError(f"eta {eta} is outside [0, 1]")
    if objective == "cost" and max_power_w is None and sweep.setting != "power_limit_w":
        raise SweepError(f"sweep {sweep.label!r} varies {sweep.setting}: the cost objective needs max_power_w")
    top = int(np.argmax(sweep.values))
    reference_time, reference_energy = sweep.time_s[top], sweep.energy_j[top]
    max_power = float(sweep.values.max()) if max_power_w is None else max_power_w
    if objective == "energy":
        score = sweep.energy_j
    elif objective == "time":
        score = sweep.time_s
    else:
        score = eta * sweep.energy_j + (1 - eta) * max_power * sweep.time_s
    slowdown_pct = 100.0 * (sweep.time_s / reference_time - 1.0)
    allowed = np.ones(len(score), bool) if max_slowdown_pct is None else slowdown_pct <= max_slowdown_pct + 1e-9
    allowed[top] = True  # the highest setting is always admissible: it defines zero slowdown
    best = int(np.flatnonzero(allowed)[np.argmin(score[allowed])])
    candidates = [{"setting": float(v), "time_s": float(t), "energy_j": float(e), "score": float(s),
                   "slowdown_pct": float(d), "allowed": bool(a)}
                  for v, t, e, s, d, a in zip(sweep.values, sweep.time_s, sweep.energy_j, score, slowdown_pct, allowed)]
    return Choice(label=sweep.label, objective=objective, setting=sweep.setting, chosen=float(sweep.values[best]),
                  time_s=float(sweep.time_s[best]), energy_j=float(sweep.energy_j[best]),
                  slowdown_pct=float(slowdown_pct[best]),
                  energy_saving_pct=float(100.0 * (1 - sweep.energy_j[best] / reference_energy)),
                  candidates=candidates)
