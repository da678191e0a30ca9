"""Power-model coefficients and their solution from sufficient statistics (pure numpy/scipy).

Model (W): P = static_w + temp_w_per_c*(T - 25) + dyn_w*activity^gamma*(f/f_max)^alpha + mem_w*memory
             + pcie_w_per_gbps*pcie_GBps.
With clock readings gamma = 1 and alpha is fitted; without them alpha is not identifiable and gamma
(utilisation saturates) and a decay time constant after work stops are fitted instead.
The heavy part (sums over rows) is SQL (models/sql/power_suffstats.sql); this module only solves
the 5x5 normal equations per GPU model and exponent, with the signs physics demands.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
from scipy.optimize import lsq_linear

N_FEATURES = 5  # intercept, temperature, dynamic, memory, pcie
FEATURE_NAMES = ("static_w", "temp_w_per_c", "dyn_w", "mem_w", "pcie_w_per_gbps")
# Lower/upper bounds per coefficient: static power is positive, dynamic, memory and PCIe power
# cannot be negative; the temperature slope is left free (a wrong sign is a finding, not a fix).
LOWER_BOUNDS = np.array([1e-6, -np.inf, 0.0, 0.0, 0.0])
UPPER_BOUNDS = np.full(N_FEATURES, np.inf)
# Static power (W at 25 C) below which its rise per 10 C is not reported as a share of it. A GPU
# idles at tens of W; a fit that pushed the intercept to its 1e-6 W bound (the real MDDAir log,
# hot whenever busy, gave static 1e-6 W and 9.9 W/C) has not measured it, and the share came out
# as 9.9e9 % per 10 C in fct_power_model and the report. 1 W, as drift_pct skips terms below 1 W.
MIN_STATIC_SHARE_BASE_W = 1.0


class FitError(ValueError):
    """Sufficient statistics that cannot be solved (too few rows, no variation)."""


@dataclass(frozen=True)
class PowerCoefficients:
    """One GPU model's fitted power model. Watts; f_max in MHz; alpha unitless (None: no clocks)."""

    static_w: float
    temp_w_per_c: float
    dyn_w: float
    dyn_freq_exponent: float | None
    mem_w: float
    pcie_w_per_gbps: float
    f_max_mhz: float | None
    # Exponent gamma of activity in the dynamic term (1 where clocks are read) and the time
    # constant (s) of its decay after work stops (0: none; only fitted without clock readings).
    activity_exponent: float = 1.0
    activity_hold_s: float = 0.0
    # Where alpha came from: "fleet" (the model's readings, clocks varying), "sweep:<files>" (a
    # measured clock sweep, models.clock_exponent), None (no alpha: no clocks and no sweep).
    dyn_freq_exponent_source: str | None = None

    @property
    def static_pct_per_10c(self) -> float | None:
        """Rise of static power per 10 C, in % of static power at 25 C; None where the fit put
        static power below MIN_STATIC_SHARE_BASE_W (at its bound: the share would be no measure)."""
        return 100.0 * 10.0 * self.temp_w_per_c / self.static_w if self.static_w >= MIN_STATIC_SHARE_BASE_W else None

    def predict_power_w(self, *, temp_c: float | np.ndarray = 25.0, activity_ratio=0.0,
                        clock_ratio=1.0, memory_ratio=0.0, pcie_gbps=0.0) -> np.ndarray | float:
        """Predicted steady-state board power in W (unclipped: apply min(P, limit) where a cap holds)."""
        alpha = 1.0 if self.dyn_freq_exponent is None else self.dyn_freq_exponent
        activity = np.power(np.asarray(activity_ratio, dtype=float), self.activity_exponent)
        return (self.static_w + self.temp_w_per_c * (np.asarray(temp_c) - 25.0)
                + self.dyn_w * activity * np.power(np.asarray(clock_ratio, dtype=float), alpha)
                + self.mem_w * np.asarray(memory_ratio) + self.pcie_w_per_gbps * np.asarray(pcie_gbps))

    def as_row(self) -> dict[str, float | None]:
        return {"static_w": self.static_w, "temp_w_per_c": self.temp_w_per_c, "dyn_w": self.dyn_w,
                "dyn_freq_exponent": self.dyn_freq_exponent, "mem_w": self.mem_w,
                "pcie_w_per_gbps": self.pcie_w_per_gbps, "f_max_mhz": self.f_max_mhz,
                "activity_exponent": self.activity_exponent, "activity_hold_s": self.activity_hold_s,
                "dyn_freq_exponent_source": self.dyn_freq_exponent_source}


@dataclass(frozen=True)
class LinearSolution:
    beta: np.ndarray  # the 5 coefficients (0 for dropped features)
    sse_w2: float  # training sum of squared errors, W^2
    n: int
    used: tuple[bool, ...]  # which features had variation and were fitted


def normal_equations(stats: Mapping[str, float]) -> tuple[np.ndarray, np.ndarray, float, int]:
    """(X'X, X'y, y'y, n) from one row of power_suffstats."""
    n = int(stats["n"])
    xtx = np.empty((N_FEATURES, N_FEATURES))
    for i in range(N_FEATURES):
        for j in range(i, N_FEATURES):
            value = float(n) if i == j == 0 else float(stats[f"xtx_{i}_{j}"] or 0.0)
            xtx[i, j] = xtx[j, i] = value
    xty = np.array([float(stats[f"xty_{i}"] or 0.0) for i in range(N_FEATURES)])
    return xtx, xty, float(stats["yty"] or 0.0), n


def solve_normal_equations(xtx: np.ndarray, xty: np.ndarray, yty: float, n: int) -> LinearSolution:
    """Bounded least squares from sufficient statistics alone.

    With X'X = L L' (Cholesky), ||X b - y||^2 = ||L' b - L^-1 X'y||^2 + const, so lsq_linear on the
    5x5 system gives the same bounded optimum as on the rows. Features without variation (a column
    of zeros, or constant and so collinear with the intercept) are dropped and get coefficient 0.
    """
    if n < N_FEATURES + 1:
        raise FitError(f"{n} training rows; need at least {N_FEATURES + 1}")
    mean = xtx[0] / n
    variance = np.diag(xtx) / n - mean**2
    scale_ref = np.maximum(np.diag(xtx) / n, 1e-300)
    used = [True] + [bool(variance[i] > 1e-9 * scale_ref[i]) for i in range(1, N_FEATURES)]
    idx = np.flatnonzero(used)
    a = xtx[np.ix_(idx, idx)]
    b = xty[idx]
    d = np.sqrt(np.diag(a))  # column scaling for conditioning
    a_scaled = a / np.outer(d, d) + 1e-12 * np.eye(len(idx))
    chol = np.linalg.cholesky(a_scaled)
    rhs = np.linalg.solve(chol, b / d)
    result = lsq_linear(chol.T, rhs, bounds=(LOWER_BOUNDS[idx] * d, UPPER_BOUNDS[idx] * d),
                        method="bvls", lsmr_tol="auto")
    beta = np.zeros(N_FEATURES)
    beta[idx] = result.x / d
    sse = float(yty - 2 * beta @ xty + beta @ xtx @ beta)
    return LinearSolution(beta=beta, sse_w2=max(sse, 0.0), n=n, used=tuple(used))


# Training SSE that moves less than this share along the alpha grid says nothing of alpha.
ALPHA_FLAT_RELATIVE = 1e-9


@dataclass(frozen=True)
class DynamicShape:
    """The dynamic term's shape: alpha of the clock ratio (None: no clocks), gamma of activity, hold s."""

    alpha: float | None
    activity_exponent: float = 1.0
    activity_hold_s: float = 0.0


def best_shape(rows: Sequence[Mapping[str, float]], *, has_clock: bool) -> tuple[DynamicShape, LinearSolution]:
    """Solve each grid point's statistics; return (the shape with least training SSE, its solution).

    Without clock readings every alpha gives the same features, and alpha is reported as None; so
    it is where the clock varied only where nothing ran (busy rows at f_max, idle ones at the idle
    clock: 0 x r^alpha = 0 and 1^alpha = 1), which every alpha fits equally. The first of the
    tie was stored as a measured alpha of 1.0, a cap's slowdown came out about 4x too large
    (true alpha 4.4), and the clock sweeps that would have given alpha were never read.
    """
    if not rows:
        raise FitError("no sufficient-statistics rows (no training samples)")
    solved = [(row, solve_normal_equations(*normal_equations(row))) for row in rows]
    row, best = min(solved, key=lambda pair: pair[1].sse_w2)  # the first of a tie, as before
    shape_of = lambda r: (r.get("activity_exponent"), r.get("activity_hold_s"))  # noqa: E731
    along_alpha = [s.sse_w2 for r, s in solved if shape_of(r) == shape_of(row)]
    identified = has_clock and max(along_alpha) - min(along_alpha) > ALPHA_FLAT_RELATIVE * max(min(along_alpha), 1.0)
    shape = DynamicShape(alpha=float(row["alpha"]) if identified else None,
                         activity_exponent=float(row.get("activity_exponent") or 1.0),
                         activity_hold_s=float(row.get("activity_hold_s") or 0.0))
    return shape, best


def best_exponent(rows: Sequence[Mapping[str, float]], *, has_clock: bool) -> tuple[float | None, LinearSolution]:
    """(alpha with least training SSE, its solution): best_shape without gamma and the hold."""
    shape, solution = best_shape(rows, has_clock=has_clock)
    return shape.alpha, solution


def coefficients_from(solution: LinearSolution, shape: DynamicShape | float | None,
                      f_max_mhz: float | None) -> PowerCoefficients:
    """PowerCoefficients from a solution and its shape (a bare alpha or None: gamma 1, no hold)."""
    if not isinstance(shape, DynamicShape):
        shape = DynamicShape(alpha=shape)
    b = solution.beta
    return PowerCoefficients(static_w=float(b[0]), temp_w_per_c=float(b[1]), dyn_w=float(b[2]),
                             dyn_freq_exponent=shape.alpha, mem_w=float(b[3]), pcie_w_per_gbps=float(b[4]),
                             f_max_mhz=f_max_mhz, activity_exponent=shape.activity_exponent,
                             activity_hold_s=shape.activity_hold_s,
                             dyn_freq_exponent_source=None if shape.alpha is None else "fleet")
