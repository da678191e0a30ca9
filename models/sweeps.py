"""Measured power-limit and clock sweeps, and the setting they call for.

Formats, recognised by their columns:
- Zeus test profiles (`start_time, window_name, elapsed_time, gpu0_energy`): one profiling window
  per limit, window_name `__GlobalPowerLimitOptimizer_<W>`, elapsed_time s, gpu0_energy J.
  Where one limit has several windows, their mean is used (a window is a fixed number of
  iterations; Zeus's optimizer likewise keeps one time and energy per limit).
- Zeus NSDI'23 summaries (`dataset, network, batch_size, optimizer, power_limit, time_per_epoch,
  average_power`): one sweep per workload; energy per epoch = time_per_epoch x average_power.
- Perseus stage profiles (`stage, instruction, frequency, time, energy`): SM clock (MHz) sweeps;
  summed over stages and forward/backward, one iteration's time (s) and energy (J) per clock.
- A grid of locked SM clock x power limit (`workload, sm_clock_mhz, power_limit_w, time_s` and
  `energy_j` or `avg_power_w`): one sweep per workload; an empty sm_clock_mhz means the clock was
  not locked, an empty power_limit_w that the limit was the default. Repeated points are averaged.

Every setting is compared with the fastest one measured (the least time): a slowdown bound keeps
the settings within that many percent of it, and savings are counted against it.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from joulehouse.collectors.input_file import reading, regular_file

OBJECTIVES = ("energy", "cost", "time")
SETTINGS = ("sm_clock_mhz", "power_limit_w")
# Zeus's own power-limit probe windows; a user's window named "epoch_200" is none
_WINDOW = re.compile(r"^__GlobalPowerLimitOptimizer_(\d+(?:\.\d+)?)$")
MAX_SWEEP_BYTES = 64 * 1024 * 1024  # a sweep is a few hundred rows; a larger file is not one
# What one GPU can draw (W) and be clocked at (MHz): the largest board today (GB300) is rated
# 1,400 W. A measurement outside these, or drawing more than 1.5x its power limit (the
# warehouse's max_power_over_limit_ratio), is a unit slip or a made-up row, not a setting to choose.
MAX_GPU_POWER_W = 3000.0
MIN_GPU_POWER_W = 1.0
MAX_SM_CLOCK_MHZ = 5000.0
MAX_OVER_LIMIT_RATIO = 1.5
_COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_ .()/%-]{0,63}")
_Point = tuple[float, float]  # (sm_clock_mhz, power_limit_w), NaN where not set


class SweepError(ValueError):
    """A sweep file that is not in a known format, or a sweep with nothing to choose from."""


@dataclass(frozen=True)
class Sweep:
    """One workload's measured settings: per point the locked SM clock (MHz, NaN: not locked), the
    power limit (W, NaN: the default), the time (s) and the energy (J) of the same work."""

    label: str
    sm_clock_mhz: np.ndarray
    power_limit_w: np.ndarray
    time_s: np.ndarray
    energy_j: np.ndarray

    @classmethod
    def of_power_limits(cls, label: str, power_limit_w, time_s, energy_j) -> "Sweep":
        limits = np.asarray(power_limit_w, float)
        return cls(label, np.full(len(limits), np.nan), limits, np.asarray(time_s, float), np.asarray(energy_j, float))

    @classmethod
    def of_clocks(cls, label: str, sm_clock_mhz, time_s, energy_j) -> "Sweep":
        clocks = np.asarray(sm_clock_mhz, float)
        return cls(label, clocks, np.full(len(clocks), np.nan), np.asarray(time_s, float), np.asarray(energy_j, float))

    @property
    def varied(self) -> tuple[str, ...]:
        """The settings that take more than one value, in SETTINGS order."""
        return tuple(name for name in SETTINGS
                     if len({("nan" if math.isnan(v) else v) for v in getattr(self, name)}) > 1)

    @property
    def setting(self) -> str:
        """What the sweep varies: power_limit_w, sm_clock_mhz or sm_clock_mhz+power_limit_w."""
        return "+".join(self.varied) or "power_limit_w"

    @property
    def values(self) -> np.ndarray:
        """The one varied setting's values (a sweep of one setting only)."""
        if len(self.varied) > 1:
            raise SweepError(f"sweep {self.label!r} varies {self.setting}: name the setting")
        return getattr(self, self.varied[0] if self.varied else "power_limit_w")

    @property
    def average_power_w(self) -> np.ndarray:
        return self.energy_j / self.time_s


@dataclass(frozen=True)
class Choice:
    """The chosen setting (None: leave it as it is) and what it costs against the fastest one."""

    label: str
    objective: str
    sm_clock_mhz: float | None
    power_limit_w: float | None
    time_s: float
    energy_j: float
    slowdown_pct: float
    energy_saving_pct: float
    fastest_sm_clock_mhz: float | None
    fastest_power_limit_w: float | None
    fastest_time_s: float
    fastest_energy_j: float
    max_slowdown_pct: float | None
    candidates: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _setting(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def _rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """(line number in the file where the row ends, row) for each CSV row; DictReader skips blank
    lines and a quoted field may span lines, so the number is the reader's, not a count."""
    rows = []
    with reading(path, "sweep file", SweepError, parse_errors=(UnicodeDecodeError, csv.Error),
                 expected="a readable CSV", newline="") as fh:
        reader = csv.DictReader(fh)
        for row in reader:
            if None in row:  # DictReader files the fields past the header under the key None
                raise SweepError(f"sweep file {path}, line {reader.line_num}: {len(reader.fieldnames or [])} "
                                 f"columns in the header, more fields in this row: not a sweep CSV")
            rows.append((reader.line_num, {k.strip(): (v or "").strip() for k, v in row.items()}))
    return rows


def _sweep(label: str, groups: dict[_Point, list[tuple[float, float]]]) -> Sweep:
    """One sweep from its points' (time s, energy J) measurements, averaged per point, sorted by
    clock then limit (an unset setting, NaN, sorts after the set ones)."""
    points = sorted(groups, key=lambda p: tuple((math.isnan(v), 0.0 if math.isnan(v) else v) for v in p))
    return Sweep(label, np.array([c for c, _ in points]), np.array([w for _, w in points]),
                 np.array([np.mean([t for t, _ in groups[p]]) for p in points]),
                 np.array([np.mean([e for _, e in groups[p]]) for p in points]))


def _described_header(columns: set[str]) -> str:
    """The header's column names, for an error: only what reads as a column name is repeated (a
    careless path, /etc/shadow say, would otherwise have its first line printed)."""
    names = sorted(c for c in columns if _COLUMN_NAME.fullmatch(c))
    others = len(columns) - len(names)
    if not names:
        return "its first line holds no column names"
    return f"columns {names}" + (f" (and {others} that are not column names)" if others else "")


def _check_plausible(point: _Point, time_s: float, energy_j: float, path: Path, line: int) -> None:
    """SweepError unless one measurement is something one GPU can do: a positive time, an average
    power within what a GPU draws and within 1.5x its limit, settings a GPU can take."""
    sm_clock_mhz, power_limit_w = point
    where = f"sweep file {path}, line {line}"
    if not time_s > 0:
        raise SweepError(f"{where}: time {time_s:g} s is not positive")
    if not math.isnan(power_limit_w) and not 0 < power_limit_w <= MAX_GPU_POWER_W:
        raise SweepError(f"{where}: power limit {power_limit_w:g} W is outside 0-{MAX_GPU_POWER_W:g} W")
    if not math.isnan(sm_clock_mhz) and not 0 < sm_clock_mhz <= MAX_SM_CLOCK_MHZ:
        raise SweepError(f"{where}: SM clock {sm_clock_mhz:g} MHz is outside 0-{MAX_SM_CLOCK_MHZ:g} MHz")
    avg_power_w = energy_j / time_s
    ceiling_w = MAX_GPU_POWER_W if math.isnan(power_limit_w) else min(MAX_GPU_POWER_W, MAX_OVER_LIMIT_RATIO * power_limit_w)
    if not MIN_GPU_POWER_W <= avg_power_w <= ceiling_w:
        raise SweepError(f"{where}: {energy_j:g} J in {time_s:g} s is {avg_power_w:.4g} W on average; one GPU draws "
                         f"{MIN_GPU_POWER_W:g}-{ceiling_w:g} W here (a unit slip?)")


def _optional(row: dict[str, str], column: str, path: Path, line: int) -> float:
    """An optional setting: NaN where the cell is empty, else a positive finite number."""
    if row.get(column, "") == "":
        return math.nan
    value = _number(row, column, path, line)
    if value <= 0:
        raise SweepError(f"sweep file {path}, line {line}: {column} = {row[column]!r} is not positive")
    return value


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
    path = regular_file(path, "sweep file", SweepError, MAX_SWEEP_BYTES)
    rows = _rows(path)
    if not rows:
        raise SweepError(f"sweep file {path} has no rows")
    columns = set(rows[0][1])
    groups: dict[str, dict[_Point, list[tuple[float, float]]]] = {}

    def add(label: str, point: _Point, time_s: float, energy_j: float, line: int) -> None:
        _check_plausible(point, time_s, energy_j, path, line)
        groups.setdefault(label, {}).setdefault(point, []).append((time_s, energy_j))

    if {"workload", "sm_clock_mhz", "power_limit_w", "time_s"} <= columns and columns & {"energy_j", "avg_power_w"}:
        for line, row in rows:
            t = _number(row, "time_s", path, line)
            if t <= 0:
                raise SweepError(f"sweep file {path}, line {line}: time_s = {row['time_s']!r} is not positive")
            energy = (_number(row, "energy_j", path, line) if row.get("energy_j", "") != ""
                      else t * _number(row, "avg_power_w", path, line))
            add(row["workload"] or path.stem, (_optional(row, "sm_clock_mhz", path, line),
                                               _optional(row, "power_limit_w", path, line)), t, energy, line)
    elif {"window_name", "elapsed_time", "gpu0_energy"} <= columns:
        for line, row in rows:
            match = _WINDOW.search(row["window_name"])
            if not match:
                continue  # a window that is not a power-limit probe (e.g. a user's own window)
            add(path.stem, (math.nan, float(match.group(1))), _number(row, "elapsed_time", path, line),
                _number(row, "gpu0_energy", path, line), line)
    elif {"power_limit", "time_per_epoch", "average_power"} <= columns:
        for line, row in rows:
            label = "/".join(row[k] for k in ("dataset", "network", "batch_size", "optimizer") if k in row)
            t = _number(row, "time_per_epoch", path, line)
            add(label, (math.nan, _number(row, "power_limit", path, line)), t, t * _number(row, "average_power", path, line),
                line)
    elif {"frequency", "time", "energy"} <= columns:
        per_clock: dict[float, list[float]] = {}
        parts: dict[float, set[tuple]] = {}  # the (stage, instruction...) rows each clock sums
        for line, row in rows:
            clock = _number(row, "frequency", path, line)
            acc = per_clock.setdefault(clock, [0.0, 0.0])
            acc[0] += _number(row, "time", path, line)
            acc[1] += _number(row, "energy", path, line)
            parts.setdefault(clock, set()).add(tuple(v for k, v in sorted(row.items()) if k not in ("frequency", "time",
                                                                                                     "energy")))
        _check_same_parts(path, parts)
        for clock, (t, e) in per_clock.items():
            add(path.stem, (clock, math.nan), t, e, len(rows) + 1)
    else:
        raise SweepError(f"sweep file {path} matches no known sweep format ({_described_header(columns)}); known: "
                         "Zeus profile window_name/elapsed_time/gpu0_energy, Zeus summary "
                         "power_limit/time_per_epoch/average_power, Perseus frequency/time/energy, or a "
                         "clock x limit grid workload/sm_clock_mhz/power_limit_w/time_s with energy_j or avg_power_w")
    if not groups:
        raise SweepError(f"sweep file {path}: no power-limit windows found")
    return {label: _sweep(label, g) for label, g in groups.items()}


def _check_same_parts(path: Path, parts: dict[float, set[tuple]]) -> None:
    """A stage profile sums each clock's rows (stage x forward/backward): a clock that lacks one
    sums less work, and won (a missing backward row made 1200 MHz '26% saved, 1.6% slower')."""
    every = set().union(*parts.values()) if parts else set()
    short = sorted((clock, len(every - have)) for clock, have in parts.items() if have != every)
    if short:
        clock, n = short[0]
        raise SweepError(f"sweep file {path}: {len(short)} clock(s) lack rows the others have (first {clock:g} MHz, "
                         f"{n} row(s) missing): each clock must time the same stages")


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


def choose_setting(sweep: Sweep, objective: str = "energy", eta: float = 0.5,
                   max_slowdown_pct: float | None = None, max_power_w: float | None = None) -> Choice:
    """Pick the measured setting (clock, limit) that minimises the objective.

    energy: energy of the work (J). time: time (s). cost (Zeus): eta*energy + (1 - eta)*max_power_w*time,
    max_power_w defaulting to the sweep's highest power limit (Zeus uses the device's maximum
    limit). max_slowdown_pct keeps only settings whose time is within that percentage of the
    fastest setting's (Zeus's MaxSlowdownConstraint); the fastest is always admissible.
    """
    if objective not in OBJECTIVES:
        raise SweepError(f"objective {objective!r} is not one of {OBJECTIVES}")
    if not 0.0 <= eta <= 1.0:
        raise SweepError(f"eta {eta} is outside [0, 1]")
    if max_slowdown_pct is not None and not (math.isfinite(max_slowdown_pct) and max_slowdown_pct >= 0):
        raise SweepError(f"max_slowdown_pct {max_slowdown_pct} is not a finite percentage >= 0")
    if max_power_w is not None and not (math.isfinite(max_power_w) and max_power_w > 0):
        # a negative max_power made time a reward in the cost: the slowest setting won
        raise SweepError(f"max_power_w {max_power_w} is not a finite power > 0 W")
    limits = sweep.power_limit_w[~np.isnan(sweep.power_limit_w)]
    if objective == "cost" and max_power_w is None and not limits.size:
        raise SweepError(f"sweep {sweep.label!r} varies {sweep.setting} only: the cost objective needs max_power_w")
    fastest = int(np.argmin(sweep.time_s))
    reference_time, reference_energy = sweep.time_s[fastest], sweep.energy_j[fastest]
    max_power = max_power_w if max_power_w is not None else float(limits.max()) if limits.size else math.nan
    if objective == "energy":
        score = sweep.energy_j
    elif objective == "time":
        score = sweep.time_s
    else:
        score = eta * sweep.energy_j + (1 - eta) * max_power * sweep.time_s
    slowdown_pct = 100.0 * (sweep.time_s / reference_time - 1.0)
    allowed = np.ones(len(score), bool) if max_slowdown_pct is None else slowdown_pct <= max_slowdown_pct + 1e-9
    allowed[fastest] = True
    # Ties (equal score) go to the faster setting, then to the earlier point.
    best = min(np.flatnonzero(allowed), key=lambda i: (score[i], sweep.time_s[i], i))
    candidates = [{"sm_clock_mhz": _setting(c), "power_limit_w": _setting(w), "time_s": float(t),
                   "energy_j": float(e), "score": float(sc), "slowdown_pct": float(d), "allowed": bool(a)}
                  for c, w, t, e, sc, d, a in zip(sweep.sm_clock_mhz, sweep.power_limit_w, sweep.time_s,
                                                  sweep.energy_j, score, slowdown_pct, allowed)]
    return Choice(label=sweep.label, objective=objective, sm_clock_mhz=_setting(sweep.sm_clock_mhz[best]),
                  power_limit_w=_setting(sweep.power_limit_w[best]), time_s=float(sweep.time_s[best]),
                  energy_j=float(sweep.energy_j[best]), slowdown_pct=float(slowdown_pct[best]),
                  energy_saving_pct=float(100.0 * (1 - sweep.energy_j[best] / reference_energy)),
                  fastest_sm_clock_mhz=_setting(sweep.sm_clock_mhz[fastest]),
                  fastest_power_limit_w=_setting(sweep.power_limit_w[fastest]),
                  fastest_time_s=float(reference_time), fastest_energy_j=float(reference_energy),
                  max_slowdown_pct=max_slowdown_pct, candidates=candidates)
