"""The GPU parts of the joint sensitivity S (models.joint_sensitivity), from the GPU-hours of
joint_sensitivity_gpu_hours.sql: the idle-share part d (1 - util) / d ln E and the bandwidth part
d BW_util / d ln E, each a slope on ln(hourly GPU energy) within GPU model, and beside them the
energy elasticity to network bandwidth (d ln E / d ln BW_util, utilisation held fixed; the
within-model fit of models.sensitivity_fit). gpu_parts: a scope's day, its errors from a bootstrap
over whole GPUs (the within-model OLS errors with too few GPUs); _ols_slope: the OLS errors alone,
which the sliding windows use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from joulehouse.models.sensitivity_fit import (MIN_ACTIVITY_RATIO, MIN_GPUS_FOR_BOOTSTRAP, _within_model_solution,
                                               gpu_bootstrap_error)

MIN_GPU_HOURS = 8


def _semi_slopes(rows: Sequence[dict]) -> np.ndarray | None:
    """[d(1-u)/d lnE, d BW/d lnE] within GPU model, or None when ln E does not vary within models."""
    sums: dict[str, np.ndarray] = {}
    for r in rows:
        x, u, b = np.log(r["energy_kwh"]), 1.0 - r["activity_ratio"], r["network_occupancy_ratio"]
        sums[r["gpu_model"]] = sums.get(r["gpu_model"], 0.0) + np.array([1.0, x, u, b, x * x, x * u, x * b])
    return _slopes_within_models(sums.values())


def _slopes_within_models(model_sums: Iterable[np.ndarray]) -> np.ndarray | None:
    """[d(1-u)/d lnE, d BW/d lnE] from each GPU model's sums [n, sx, su, sb, sxx, sxu, sxb],
    centred within its model; None when ln E does not vary within models."""
    sxx = sxu = sxb = 0.0
    for n, sx, su, sb, s_xx, s_xu, s_xb in model_sums:
        sxx += s_xx - sx * sx / n
        sxu += s_xu - sx * su / n
        sxb += s_xb - sx * sb / n
    if sxx <= 1e-12:
        return None
    return np.array([sxu / sxx, sxb / sxx])


def _elasticity_stats(rows: Sequence[dict]) -> list[dict]:
    """Per-GPU sums for ln E on [ln activity, ln occupancy] (models.sensitivity's format)."""
    by_gpu: dict[str, dict] = {}
    for r in rows:
        if r["activity_ratio"] < MIN_ACTIVITY_RATIO or r["network_occupancy_ratio"] <= 0:
            continue
        x1, x2, y = np.log(r["activity_ratio"]), np.log(r["network_occupancy_ratio"]), np.log(r["energy_kwh"])
        s = by_gpu.setdefault(r["gpu_uuid"], {"gpu_model": r["gpu_model"], **dict.fromkeys(
            ("n", "s_1", "s_2", "s_y", "s_11", "s_12", "s_22", "s_1y", "s_2y", "s_yy"), 0.0)})
        for key, value in (("n", 1.0), ("s_1", x1), ("s_2", x2), ("s_y", y), ("s_11", x1 * x1), ("s_12", x1 * x2),
                           ("s_22", x2 * x2), ("s_1y", x1 * y), ("s_2y", x2 * y), ("s_yy", y * y)):
            s[key] += value
    return list(by_gpu.values())


SEMI_KEYS = 7  # n, sum x, sum u, sum b, sum x^2, sum xu, sum xb (x = ln E, u = 1 - activity, b = occupancy)
ELASTICITY_KEYS = ("n", "s_1", "s_2", "s_y", "s_11", "s_12", "s_22", "s_1y", "s_2y", "s_yy")


def _semi_terms(r: dict) -> list:
    x, u, b = np.log(r["energy_kwh"]), 1.0 - r["activity_ratio"], r["network_occupancy_ratio"]
    return [1.0, x, u, b, x * x, x * u, x * b]


def _elasticity_terms(r: dict) -> list | None:
    if r["activity_ratio"] < MIN_ACTIVITY_RATIO or r["network_occupancy_ratio"] <= 0:
        return None
    x1, x2, y = np.log(r["activity_ratio"]), np.log(r["network_occupancy_ratio"]), np.log(r["energy_kwh"])
    return [1.0, x1, x2, y, x1 * x1, x1 * x2, x2 * x2, x1 * y, x2 * y, y * y]


class _ResampledSums:
    """_semi_slopes and _elasticity_stats of a bootstrap sample of whole GPUs, from each GPU's
    terms computed once: the bootstrap recomputed every row's logs and sums per draw (3 s of the
    daily fit at 32 GPUs). The sums are taken in the sample's row order, one addition after the
    other from 0.0 (np.cumsum is sequential), so each draw is the same to the last bit."""

    def __init__(self, gpus: Sequence[Sequence[dict]]):
        self.models = [g[0]["gpu_model"] for g in gpus]
        self.semi = [np.array([_semi_terms(r) for r in g], float) for g in gpus]
        self.elasticity = []
        for g in gpus:
            terms = [t for t in map(_elasticity_terms, g) if t is not None]
            self.elasticity.append(np.array(terms, float).reshape(len(terms), len(ELASTICITY_KEYS)))

    @staticmethod
    def applies(gpus: Sequence[Sequence[dict]]) -> bool:
        """Each GPU's rows are of one model (the per-model sums then follow whole GPUs)."""
        return all(len({r["gpu_model"] for r in g}) == 1 for g in gpus)

    @staticmethod
    def _sequential_sum(blocks: list[np.ndarray], width: int) -> np.ndarray:
        return np.cumsum(np.concatenate([np.zeros((1, width)), *blocks]), axis=0)[-1]

    def semi_slopes(self, picks: Sequence[int]) -> np.ndarray | None:
        """_semi_slopes of the rows of GPUs `picks`, in that order."""
        by_model: dict[str, list[np.ndarray]] = {}
        for i in picks:
            by_model.setdefault(self.models[i], []).append(self.semi[i])
        return _slopes_within_models(self._sequential_sum(blocks, SEMI_KEYS) for blocks in by_model.values())

    def elasticity_stats(self, picks: Sequence[int]) -> list[dict]:
        """_elasticity_stats of the rows of GPUs `picks`: a GPU drawn k times sums its rows k times."""
        drawn: dict[int, int] = {}
        for i in picks:
            if len(self.elasticity[i]):
                drawn[int(i)] = drawn.get(int(i), 0) + 1
        return [{"gpu_model": self.models[i],
                 **dict(zip(ELASTICITY_KEYS, self._sequential_sum([self.elasticity[i]] * k, len(ELASTICITY_KEYS))))}
                for i, k in drawn.items()]


GpuParts = tuple[np.ndarray, np.ndarray, np.ndarray, str, int, float]


def gpu_parts(rows: Sequence[dict], *, reps: int, seed: int) -> GpuParts | None:
    """(point [idle, bw, elasticity], their standard errors, draws of [idle, bw] (reps x 2, spread
    as their errors), method, GPUs, degrees of freedom of the errors) over one scope's GPU-hours; None with too few hours.
    With enough GPUs the errors come from a bootstrap that resamples whole GPUs (read as a
    cluster-robust error of G GPUs, G - 1 df: sensitivity_fit.gpu_bootstrap_error), else
    from the within-model OLS (no elasticity then; df its residual degrees of freedom: read with
    the normal's 1.96, 9 GPU-hours' intervals held the truth 90.7% of the time)."""
    if len(rows) < MIN_GPU_HOURS:
        return None
    by_gpu: dict[str, list[dict]] = {}
    for r in rows:
        by_gpu.setdefault(r["gpu_uuid"], []).append(r)

    def fit(sample: Sequence[dict]) -> np.ndarray | None:
        semi = _semi_slopes(sample)
        solution = _within_model_solution(_elasticity_stats(sample))
        if semi is None:
            return None
        return np.array([semi[0], semi[1], solution[0][1] if solution is not None else np.nan])

    point = fit(rows)
    if point is None:
        return None

    def ols_fe() -> GpuParts | None:
        fitted = _ols_slope(rows)
        if fitted is None:
            return None
        _, se, df = fitted
        draws = np.random.default_rng(seed).normal(point[:2], se, size=(max(reps, 2), 2))
        return (np.array([point[0], point[1], np.nan]), np.array([se[0], se[1], np.nan]), draws, "ols-fe",
                len(by_gpu), float(df))

    if len(by_gpu) < MIN_GPUS_FOR_BOOTSTRAP:
        return ols_fe()
    rng = np.random.default_rng(seed)
    gpus = list(by_gpu.values())
    resampled = _ResampledSums(gpus) if _ResampledSums.applies(gpus) else None
    draws = []
    for _ in range(reps):
        picks = rng.integers(0, len(gpus), len(gpus))
        if resampled is not None:
            semi, stats_rows = resampled.semi_slopes(picks), resampled.elasticity_stats(picks)
            solution = _within_model_solution(stats_rows)
            d = None if semi is None else np.array([semi[0], semi[1], solution[0][1] if solution is not None else np.nan])
        else:
            d = fit([r for i in picks for r in gpus[i]])
        if d is not None:
            draws.append(d)
    if len(draws) < 2:  # every resample singular (few GPUs whose activity varies): no spread to read
        return ols_fe()
    draws = np.array(draws)
    se, df = gpu_bootstrap_error(draws, len(gpus))
    # S adds the parts' variance from the draws: spread as the errors are
    spread = point[:2] + (draws[:, :2] - draws[:, :2].mean(axis=0)) * np.sqrt(len(gpus) / (len(gpus) - 1))
    return point, se, spread, "ols-fe+gpu-bootstrap", len(gpus), df


def _ols_slope(rows: Sequence[dict]) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Window estimate of [idle, bw] parts, their OLS standard errors (within-model demeaning) and
    the residual degrees of freedom the errors were read with (rows - 1 - GPU models)."""
    semi = _semi_slopes(rows)
    if semi is None:
        return None
    models = {r["gpu_model"] for r in rows}
    df = len(rows) - 1 - len(models)
    if df < 1:
        return None
    by_model: dict[str, list[dict]] = {}
    for r in rows:
        by_model.setdefault(r["gpu_model"], []).append(r)
    sxx, sse = 0.0, np.zeros(2)
    for group in by_model.values():
        x = np.log([r["energy_kwh"] for r in group])
        ys = np.array([[1.0 - r["activity_ratio"], r["network_occupancy_ratio"]] for r in group])
        xd, yd = x - x.mean(), ys - ys.mean(axis=0)
        sxx += float(xd @ xd)
        sse += ((yd - np.outer(xd, semi)) ** 2).sum(axis=0)
    return semi, np.sqrt(sse / df / sxx), df
