"""The clock exponent alpha of the dynamic power term, from a measured SM-clock sweep.

The power model (models/coefficients.py) writes the dynamic term as dyn_w * act * (f/f_max)^alpha.
The fleet's readings identify alpha only where the SM clock varies under load; a GPU model whose
readings never show it (an nvidia-smi log without clocks, a fleet that never caps) borrows alpha
from a measured clock sweep of the same model (`[models].clock_sweep_files`): per locked clock
the time and energy of the same work (the Perseus stage profiles: models.sweeps), so the average
power P(f) = E/T. A sweep runs at one activity, so P(f) = c + k (f/f_max)^alpha, with c (W) the
power that does not follow the SM clock (static, memory) and k the dynamic power at f_max:
fitted as the power fit does it, non-negative least squares per alpha of a grid, the least SSE
kept. Which source each fitted exponent came from is recorded beside it
(fct_power_model.dyn_freq_exponent_source).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.optimize import nnls

from joulehouse.models.coefficients import ALPHA_FLAT_RELATIVE, PowerCoefficients
from joulehouse.models.settings import ModelSettings
from joulehouse.models.sweeps import Sweep, SweepError, load_sweeps

SOURCE_FLEET = "fleet"  # the GPU model's own readings, where its clock varies


@dataclass(frozen=True)
class SweepExponent:
    """alpha fitted to one clock sweep, with the power split it implies (W) and its fit error."""

    source: str
    alpha: float
    unclocked_power_w: float  # c: static + memory, what the SM clock does not move
    dyn_w: float  # k: dynamic power at the sweep's highest clock
    rmse_w: float
    n_clocks: int
    f_min_mhz: float
    f_max_mhz: float


def exponent_grid(alpha_min: float, alpha_step: float, alpha_count: int) -> np.ndarray:
    """The settings' grid of alpha: alpha_min + alpha_step * i, i < alpha_count."""
    return alpha_min + alpha_step * np.arange(alpha_count)


def fit_sweep_exponent(sweep: Sweep, alphas: np.ndarray, source: str | None = None) -> SweepExponent:
    """Least-squares alpha (on the grid `alphas`) of P(f) = c + k (f/f_max)^alpha, c, k >= 0,
    over a sweep of locked SM clocks; raises SweepError for a sweep that does not vary the clock."""
    if "sm_clock_mhz" not in sweep.varied:
        raise SweepError(f"sweep {sweep.label!r} varies {sweep.setting}, not the SM clock: no clock exponent")
    clocks = sweep.sm_clock_mhz
    keep = ~np.isnan(clocks) & _at_the_highest_limit(sweep.power_limit_w)
    if keep.sum() < 3:
        raise SweepError(f"sweep {sweep.label!r}: {int(keep.sum())} locked clocks; need at least 3 for an exponent")
    f, power = clocks[keep], sweep.average_power_w[keep]
    ratio = f / f.max()
    fits = []
    for alpha in np.asarray(alphas, float):
        design = np.column_stack([np.ones_like(ratio), ratio**alpha])
        beta, _ = nnls(design, power)
        fits.append((float(((design @ beta - power) ** 2).sum()), float(alpha), beta))
    sse, alpha, beta = min(fits, key=lambda fit: fit[0])  # the first of a tie
    sses = [fit[0] for fit in fits]
    if beta[1] <= 0 or (len(sses) > 1 and max(sses) - min(sses) <= ALPHA_FLAT_RELATIVE * max(min(sses), 1.0)):
        # every alpha fits alike (the power does not follow the clock: a memory-bound workload);
        # the grid's first alpha was stored as measured
        raise SweepError(f"sweep {sweep.label!r}: its power does not follow the SM clock; no exponent to read")
    return SweepExponent(source=source or sweep.label, alpha=alpha, unclocked_power_w=float(beta[0]),
                         dyn_w=float(beta[1]), rmse_w=float(np.sqrt(sse / len(power))), n_clocks=int(len(power)),
                         f_min_mhz=float(f.min()), f_max_mhz=float(f.max()))


def _at_the_highest_limit(limits_w: np.ndarray) -> np.ndarray:
    """The points of a clock sweep at its highest power limit (or the default, NaN): P(f) holds
    where no cap binds. A clock x limit grid's capped rows fitted with the rest gave 1.3 for 3."""
    if np.isnan(limits_w).any():
        return np.isnan(limits_w)
    return limits_w == limits_w.max()


def parse_sweep_file_entry(entry: str) -> tuple[str, Path]:
    """'PATTERN|PATH' of [models].clock_sweep_files: (GPU-model pattern, sweep file)."""
    pattern, sep, path = entry.partition("|")
    if not sep or not pattern.strip() or not path.strip():
        raise ValueError(f"clock sweep entry {entry!r}: expected 'GPU-model pattern|path to the sweep file'")
    return pattern.strip(), Path(path.strip())


def _matches(pattern: str, gpu_model: str) -> bool:
    """The pattern as a whole word of the NVML name, case-insensitive (`A100` does not match `A1000`)."""
    return re.search(rf"(?<![a-z0-9]){re.escape(pattern.casefold())}(?![a-z0-9])", gpu_model.casefold()) is not None


def sweep_exponent_for(gpu_model: str, entries: tuple[str, ...], alphas: np.ndarray) -> SweepExponent | None:
    """alpha for `gpu_model` from the configured sweeps of its model: the median of one fit per
    file (each file one workload; SOURCE names the files), or None where no entry matches or no
    file can be read (the exponent then stays unknown, as before)."""
    fits = []
    for entry in entries:
        pattern, path = parse_sweep_file_entry(entry)
        if not _matches(pattern, gpu_model):
            continue
        try:
            sweeps = load_sweeps(path)
        except SweepError:
            continue  # a configured file that is gone: the model keeps no sweep exponent
        for sweep in sweeps.values():
            if "sm_clock_mhz" in sweep.varied:
                try:
                    fits.append(fit_sweep_exponent(sweep, alphas, source=path.name))
                except SweepError:
                    continue  # a workload whose power does not follow the clock says nothing of alpha
    if not fits:
        return None
    fits.sort(key=lambda e: e.alpha)
    middle = fits[len(fits) // 2] if len(fits) % 2 else None
    alpha = middle.alpha if middle else float(np.mean([fits[len(fits) // 2 - 1].alpha, fits[len(fits) // 2].alpha]))
    return SweepExponent(source="sweep:" + ",".join(e.source for e in fits), alpha=alpha,
                         unclocked_power_w=float(np.median([e.unclocked_power_w for e in fits])),
                         dyn_w=float(np.median([e.dyn_w for e in fits])),
                         rmse_w=float(np.max([e.rmse_w for e in fits])), n_clocks=sum(e.n_clocks for e in fits),
                         f_min_mhz=min(e.f_min_mhz for e in fits), f_max_mhz=max(e.f_max_mhz for e in fits))


def with_sweep_exponent(coefficients: PowerCoefficients, gpu_model: str, settings: ModelSettings) -> PowerCoefficients:
    """`coefficients` with alpha from the model's configured clock sweeps where its readings gave
    none (alpha None); unchanged where the fleet fitted it or no sweep of the model is configured."""
    if coefficients.dyn_freq_exponent is not None or not settings.clock_sweep_files:
        return coefficients
    grid = exponent_grid(settings.alpha_min, settings.alpha_step, settings.alpha_count)
    found = sweep_exponent_for(gpu_model, tuple(settings.clock_sweep_files), grid)
    if found is None:
        return coefficients
    return replace(coefficients, dyn_freq_exponent=found.alpha, dyn_freq_exponent_source=found.source)
