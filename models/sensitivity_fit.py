"""What every sensitivity fit shares: the row it gives (`Sensitivity`), the within-GPU-model
regression from per-GPU sums, plain OLS, and the thresholds on the hours they read
(models.sensitivity, models.joint_sensitivity)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np
from scipy import stats

MIN_COVERAGE_RATIO = 0.9  # hours the meters covered less than this are left out
MIN_ACTIVITY_RATIO = 0.02  # idle hours: ln(activity) says nothing about working ones
BOOTSTRAP_REPS = 400
MIN_GPUS_FOR_BOOTSTRAP = 4


@dataclass(frozen=True)
class Sensitivity:
    """One measured sensitivity with its 95% interval (unit in `unit`)."""

    day: dt.date
    quantity: str
    scope: str
    estimate: float
    ci_low: float
    ci_high: float
    std_error: float
    n_obs: int
    n_groups: int
    method: str
    unit: str
    # Rows of the joint sensitivity S (models.joint_sensitivity): the normalised weights S used,
    # and the source's typical value for the workload it is compared with.
    weight_utilization: float | None = None
    weight_network_bandwidth: float | None = None
    typical_value: float | None = None
    typical_workload: str | None = None


def _within_model_solution(stats_rows: list[dict]) -> tuple[np.ndarray, np.ndarray, float, int, int] | None:
    """(beta [e_util, e_dram], (X'X)^-1, SSE, n, n_models) of the fixed-effects regression, from
    per-GPU sums; None when the design is singular (no variation left within models)."""
    by_model: dict[str, np.ndarray] = {}
    keys = ("n", "s_1", "s_2", "s_y", "s_11", "s_12", "s_22", "s_1y", "s_2y", "s_yy")
    for row in stats_rows:
        v = np.array([float(row[k]) for k in keys])
        by_model[row["gpu_model"]] = by_model.get(row["gpu_model"], 0.0) + v
    xtx, xty, yty, n = np.zeros((2, 2)), np.zeros(2), 0.0, 0
    for n_m, s1, s2, sy, s11, s12, s22, s1y, s2y, syy in by_model.values():
        mean = np.array([s1, s2]) / n_m
        xtx += np.array([[s11, s12], [s12, s22]]) - n_m * np.outer(mean, mean)
        xty += np.array([s1y, s2y]) - n_m * mean * sy / n_m
        yty += syy - sy * sy / n_m
        n += int(n_m)
    if n - 2 - len(by_model) < 1 or np.linalg.cond(xtx) > 1e12:
        return None
    inverse = np.linalg.inv(xtx)
    beta = inverse @ xty
    return beta, inverse, max(float(yty - beta @ xty), 0.0), n, len(by_model)


def t95(df: float) -> float:
    """The two-sided 95% quantile for an error read with `df` degrees of freedom (the normal's at inf):
    every interval of the sensitivities and of the measured savings is read with it."""
    return 1.959964 if not np.isfinite(df) else float(stats.t.ppf(0.975, df))


def gpu_bootstrap_error(draws: np.ndarray, n_gpus: int) -> tuple[np.ndarray, float]:
    """(standard errors, degrees of freedom) of a fit from its `draws` (reps x quantities) over
    resamples of `n_gpus` whole GPUs: the draws' spread scaled by sqrt(G / (G - 1)), read with
    t(G - 1), as a cluster-robust error of G clusters is. The bootstrap's own variance is (G - 1) / G
    of that error's, and its percentiles or 1.96 stand for a normal the few GPUs do not give:
    4 GPUs' percentile intervals held a drawn truth 77-85% of the time, 10 GPUs' 86-91%."""
    return np.nanstd(draws, axis=0, ddof=1) * np.sqrt(n_gpus / (n_gpus - 1)), float(n_gpus - 1)


def _ols(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(beta, standard errors, residual degrees of freedom) of y on [1, x]."""
    design = np.column_stack([np.ones(len(y)), x])
    beta, *_ = np.linalg.lstsq(design, y, rcond=None)
    df = len(y) - design.shape[1]
    sigma2 = float(np.sum((y - design @ beta) ** 2)) / df
    return beta, np.sqrt(np.diag(np.linalg.pinv(design.T @ design)) * sigma2), df
