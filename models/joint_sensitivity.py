"""The joint energy-efficiency sensitivity S = dPUE/dE + w1 d(1 - util)/dE + w2 dBW_util/dE, per
day and workload class (rows of fct_sensitivity_daily) and over a sliding window of hours
(fct_sensitivity_hourly).

E is the power drawn; each part is measured as a derivative with respect to ln E, so that the
parts are unitless and comparable across GPU models and sites (a part of 0.4 means: 10% more
power comes with 0.04 more of that quantity):
- PUE part, d PUE / d ln E: per site, PUE on ln(IT load) with outdoor temperature held fixed
  (site-hours of fct_pue_hourly); a class's part is the sites' estimates weighted by its energy there;
- idle-share part, d (1 - util) / d ln E: (1 - hourly activity) on ln(hourly GPU energy), within GPU model;
- bandwidth part, d BW_util / d ln E: the network occupancy of the GPU-hour (the fullest of its
  NVLink, PCIe and host network ports, joint_sensitivity_gpu_hours.sql) on ln(energy), within GPU model.
Beside them, energy_elasticity_to_network_bandwidth (d ln E / d ln BW_util, utilisation held fixed).
Intervals: the GPU parts from a bootstrap over GPUs (as models.sensitivity), the PUE part t-based;
S's interval adds their variances (the two come from different data); in the hourly windows the
idle and bandwidth parts' OLS errors are added as if independent (they share the regressor, so
that interval is approximate). The weights are the
settings' (`[sensitivity]`), normalised to sum to 1, and stated in every row of S.
The source's typical values (training-dense 0.18, -0.62, 0.41; inference serving 0.12, -0.33,
0.57 for PUE, utilisation, bandwidth) are put beside the classes that match them: throughput work
against training-dense, latency-sensitive against inference serving.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
from scipy import stats

from joulehouse.models.sensitivity_fit import (
    BOOTSTRAP_REPS,
    MIN_ACTIVITY_RATIO,
    MIN_COVERAGE_RATIO,
    MIN_GPUS_FOR_BOOTSTRAP,
    Sensitivity,
    _ols,
    _within_model_solution,
)
from joulehouse.models.settings import SensitivitySettings
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.lake_contract import reading_partitions
from joulehouse.warehouse.sqlio import relation_exists, replace_day_rows

TYPICAL_PARTS = {"training-dense": (0.18, -0.62, 0.41), "inference serving": (0.12, -0.33, 0.57)}
CLASS_REFERENCE = {"throughput": "training-dense", "latency-sensitive": "inference serving"}
PART_QUANTITIES = ("joint_part_pue", "joint_part_idle_share", "joint_part_network_bandwidth")
PART_UNITS = ("d PUE / d ln(power)", "d (1 - utilization) / d ln(power)", "d occupancy / d ln(power)")
S_UNIT = "dPUE/dlnE + w1 d(1-util)/dlnE + w2 dBW/dlnE"
MIN_GPU_HOURS = 8
MIN_SITE_HOURS = 4
# intercept, load and temperature with at least two degrees of freedom left
MIN_HOURS_WITH_TEMPERATURE = 5
Z95 = 1.959964


@dataclass(frozen=True)
class Weights:
    """w1 (utilisation) and w2 (network bandwidth), normalised to sum to 1."""

    utilization: float
    network_bandwidth: float

    @classmethod
    def from_settings(cls, settings: SensitivitySettings) -> Weights:
        total = settings.weight_utilization + settings.weight_network_bandwidth
        if total <= 0:
            raise ValueError("[sensitivity] weight_utilization and weight_network_bandwidth are both 0: "
                             "S needs at least one of them above 0")
        return cls(settings.weight_utilization / total, settings.weight_network_bandwidth / total)


@dataclass(frozen=True)
class Estimate:
    value: float
    std_error: float
    n_obs: int
    n_groups: int


def read_gpu_hours(con: duckdb.DuckDBPyConnection, day: dt.date) -> list[dict]:
    """The day's rows of joint_sensitivity_gpu_hours.sql (the inputs of S), as dicts; the week of
    jobs partitions it reads checked against the lake contract first."""
    with reading_partitions(con, "jobs", day - dt.timedelta(days=7), day):
        cursor = con.execute(load_sql("joint_sensitivity_gpu_hours"), {"day": day, "min_coverage_ratio": MIN_COVERAGE_RATIO})
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor.fetchall()]


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


def gpu_parts(rows: Sequence[dict], *, reps: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, str, int] | None:
    """(point [idle, bw, elasticity], their standard errors, draws of [idle, bw] (reps x 2), method,
    GPUs) over one scope's GPU-hours; None with too few hours. With enough GPUs the errors come
    from a bootstrap that resamples whole GPUs, else from the within-model OLS (no elasticity then)."""
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

    def ols_fe() -> tuple[np.ndarray, np.ndarray, np.ndarray, str, int] | None:
        fitted = _ols_slope(rows)
        if fitted is None:
            return None
        se = fitted[1]
        draws = np.random.default_rng(seed).normal(point[:2], se, size=(max(reps, 2), 2))
        return np.array([point[0], point[1], np.nan]), np.array([se[0], se[1], np.nan]), draws, "ols-fe", len(by_gpu)

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
    return point, np.nanstd(draws, axis=0, ddof=1), draws[:, :2], "ols-fe+gpu-bootstrap", len(gpus)


def site_pue_parts(con: duckdb.DuckDBPyConnection, day: dt.date, hours: Sequence[dt.datetime] | None = None
                   ) -> dict[str, Estimate]:
    """Per site: d PUE / d ln(IT load), outdoor temperature held fixed where it varied (OLS)."""
    if not (relation_exists(con, "fct_pue_hourly") and relation_exists(con, "raw_facility_samples")):
        return {}
    rows = con.execute(load_sql("sensitivity_pue_hourly"), {"day": day, "min_coverage_ratio": MIN_COVERAGE_RATIO}).fetchall()
    if hours is not None:
        wanted = set(hours)
        rows = [r for r in rows if r[1] in wanted]
    out = {}
    for site in sorted({r[0] for r in rows}):
        site_rows = [r for r in rows if r[0] == site and r[3] is not None and r[3] > 0]
        # Where the outdoor temperature was read, it is held fixed over the hours that read it; it
        # is left out only where it was never read. Dropped whenever one hour (or a window of 4)
        # lacked it, the temperature's own swing went into the slope: 0.147 +- 0.013 for a true 0.
        if any(r[4] is not None for r in site_rows):
            site_rows = [r for r in site_rows if r[4] is not None]
            if len(site_rows) < MIN_HOURS_WITH_TEMPERATURE:
                continue
        if len(site_rows) < MIN_SITE_HOURS:
            continue
        pue = np.array([r[2] for r in site_rows], float)
        ln_load = np.log(np.array([r[3] for r in site_rows], float))
        temps = np.array([np.nan if r[4] is None else r[4] for r in site_rows], float)
        columns = [ln_load]
        if np.isfinite(temps).all() and np.ptp(temps) > 1e-6:
            columns.append(temps)
        if np.ptp(ln_load) <= 1e-9:
            continue
        beta, se, df = _ols(np.column_stack(columns), pue)
        if df < 1 or not np.isfinite(se[1]):
            continue
        out[site] = Estimate(float(beta[1]), float(se[1]), len(site_rows), 1)
    return out


def class_pue_part(rows: Sequence[dict], sites: dict[str, Estimate]) -> Estimate | None:
    """A scope's PUE part: the sites' estimates weighted by the scope's energy at each site."""
    energy: dict[str, float] = {}
    for r in rows:
        if r["site"] in sites:
            energy[r["site"]] = energy.get(r["site"], 0.0) + r["energy_kwh"]
    total = sum(energy.values())
    if total <= 0:
        return None
    weights = {s: e / total for s, e in energy.items()}
    value = sum(w * sites[s].value for s, w in weights.items())
    se = float(np.sqrt(sum((w * sites[s].std_error) ** 2 for s, w in weights.items())))
    return Estimate(value, se, sum(sites[s].n_obs for s in weights), len(weights))


def _scopes(rows: Sequence[dict]) -> dict[str, list[dict]]:
    scopes: dict[str, list[dict]] = {"fleet": list(rows)}
    for r in rows:
        if r["workload_class"]:
            scopes.setdefault(r["workload_class"], []).append(r)
    return scopes


def _row(day, quantity, scope, value, se, n_obs, n_groups, method, unit, weights=None, typical=None) -> Sensitivity:
    reference = CLASS_REFERENCE.get(scope)
    return Sensitivity(day, quantity, scope, float(value), float(value - Z95 * se), float(value + Z95 * se), float(se),
                       int(n_obs), int(n_groups), method, unit,
                       weight_utilization=weights.utilization if weights else None,
                       weight_network_bandwidth=weights.network_bandwidth if weights else None,
                       typical_value=typical, typical_workload=reference if typical is not None else None)


def joint_sensitivities(con: duckdb.DuckDBPyConnection, day: dt.date, weights: Weights, *,
                        bootstrap_reps: int = BOOTSTRAP_REPS, seed: int = 0,
                        gpu_hours: list[dict] | None = None) -> list[Sensitivity]:
    """S, its three parts and the energy elasticity to network bandwidth, per scope ('fleet' and each class).
    `gpu_hours`: the day's rows of joint_sensitivity_gpu_hours.sql when the caller has read them."""
    if not relation_exists(con, "fct_link_bandwidth_hourly"):
        return []
    rows = read_gpu_hours(con, day) if gpu_hours is None else gpu_hours
    sites = site_pue_parts(con, day)
    out: list[Sensitivity] = []
    for scope, scope_rows in _scopes(rows).items():
        fitted = gpu_parts(scope_rows, reps=bootstrap_reps, seed=seed)
        if fitted is None:
            continue
        point, se, draws, method, n_gpus = fitted
        typical = TYPICAL_PARTS.get(CLASS_REFERENCE.get(scope, ""))
        if np.isfinite(point[2]):
            out.append(_row(day, "energy_elasticity_to_network_bandwidth", scope, point[2], se[2], len(scope_rows),
                            n_gpus, method, "d ln(energy) / d ln(occupancy)"))
        pue = class_pue_part(scope_rows, sites)
        parts = [(PART_QUANTITIES[1], point[0], se[0]), (PART_QUANTITIES[2], point[1], se[1])]
        for (quantity, value, s), unit, k in zip(parts, PART_UNITS[1:], (1, 2)):
            out.append(_row(day, quantity, scope, value, s, len(scope_rows), n_gpus, method, unit,
                            typical=typical[k] if typical else None))
        if pue is None:
            continue
        out.append(_row(day, PART_QUANTITIES[0], scope, pue.value, pue.std_error, pue.n_obs, pue.n_groups, "ols",
                        PART_UNITS[0], typical=typical[0] if typical else None))
        combined = weights.utilization * draws[:, 0] + weights.network_bandwidth * draws[:, 1]
        s_value = pue.value + weights.utilization * point[0] + weights.network_bandwidth * point[1]
        s_se = float(np.sqrt(pue.std_error ** 2 + np.var(combined, ddof=1)))
        s_typical = (typical[0] + weights.utilization * typical[1] + weights.network_bandwidth * typical[2]
                     if typical else None)
        out.append(_row(day, "joint_sensitivity_s", scope, s_value, s_se, len(scope_rows), n_gpus,
                        f"pue-ols+{method}", S_UNIT, weights, s_typical))
    return out


def _ols_slope(rows: Sequence[dict]) -> tuple[np.ndarray, np.ndarray] | None:
    """Window estimate of [idle, bw] parts and their OLS standard errors (within-model demeaning)."""
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
    return semi, np.sqrt(sse / df / sxx)


def sliding_window_day(con: duckdb.DuckDBPyConnection, day: dt.date, weights: Weights, window_hours: int, *,
                       gpu_hours: list[dict] | None = None) -> list[dict]:
    """fct_sensitivity_hourly rows of `day`: S and its parts over the `window_hours` hours ending at
    each hour of the day (the day's own hours: the first windows are shorter, and say so).
    `gpu_hours` as in joint_sensitivities."""
    if not relation_exists(con, "fct_link_bandwidth_hourly"):
        return []
    rows = read_gpu_hours(con, day) if gpu_hours is None else gpu_hours
    hours = sorted({r["hour_at"] for r in rows})
    out: list[dict] = []
    t = stats.t.ppf(0.975, 30)  # the windows are small: a t quantile, not the normal's
    for end in hours:
        start = end - dt.timedelta(hours=window_hours - 1)
        in_window = [r for r in rows if start <= r["hour_at"] <= end]
        window = [h for h in hours if start <= h <= end]
        sites = site_pue_parts(con, day, window)
        for scope, scope_rows in _scopes(in_window).items():
            if len(scope_rows) < MIN_GPU_HOURS:
                continue
            fitted = _ols_slope(scope_rows)
            if fitted is None:
                continue
            (idle, bw), (idle_se, bw_se) = fitted
            pue = class_pue_part(scope_rows, sites)
            base = {"day": day, "hour_at": end, "window_hours": len(window), "scope": scope,
                    "n_obs": len(scope_rows), "weight_utilization": None, "weight_network_bandwidth": None}
            values = [(PART_QUANTITIES[1], idle, idle_se), (PART_QUANTITIES[2], bw, bw_se)]
            if pue is not None:
                values.append((PART_QUANTITIES[0], pue.value, pue.std_error))
                s_se = float(np.sqrt(pue.std_error ** 2 + (weights.utilization * idle_se) ** 2
                                     + (weights.network_bandwidth * bw_se) ** 2))
                values.append(("joint_sensitivity_s", pue.value + weights.utilization * idle
                               + weights.network_bandwidth * bw, s_se))
            for quantity, value, se in values:
                row = {**base, "quantity": quantity, "estimate": float(value), "ci_low": float(value - t * se),
                       "ci_high": float(value + t * se)}
                if quantity == "joint_sensitivity_s":
                    row.update(weight_utilization=weights.utilization, weight_network_bandwidth=weights.network_bandwidth)
                out.append(row)
    con.execute(load_sql("fct_sensitivity_hourly"))
    replace_day_rows(con, day, {"fct_sensitivity_hourly": out})
    return out
