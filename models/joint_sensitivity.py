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
The GPU parts and the elasticity are fitted in models/joint_sensitivity_gpu_parts.py; this module
reads the inputs, fits the PUE part, and puts S together per day and per window.
Intervals: the GPU parts from a bootstrap over GPUs (as models.sensitivity; with too few GPUs
the within-model OLS errors, t-based on their residual degrees of freedom), the PUE part t-based
on its sites' residual degrees of freedom; S's interval adds their variances (the two come from
different data), its t quantile from the Welch-Satterthwaite degrees of freedom of that sum. In the
hourly windows the idle and bandwidth parts are t-based on the window's own degrees of freedom
(GPU-hours - 1 - GPU models), and their OLS errors are added as if independent (they share the
regressor, so that interval is approximate). A fixed quantile made the intervals of small windows
and sites too narrow: t(30) for a window of 8 GPU-hours (6 degrees of freedom) is 17% short, and
the normal's for a site of 5 hours with temperature (2) is 54% short. The weights are the
settings' (`[sensitivity]`), normalised to sum to 1, and stated in every row of S.
The source's typical values (training-dense 0.18, -0.62, 0.41; inference serving 0.12, -0.33,
0.57 for PUE, utilisation, bandwidth) are put beside the classes that match them: throughput work
against training-dense, latency-sensitive against inference serving.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np

# _elasticity_stats, _ResampledSums and _semi_slopes are imported from here too (the tests)
from joulehouse.models.joint_sensitivity_gpu_parts import (
    MIN_GPU_HOURS,
    _elasticity_stats,
    _ols_slope,
    _ResampledSums,
    _semi_slopes,
    gpu_parts,
)
from joulehouse.models.sensitivity_fit import BOOTSTRAP_REPS, MIN_COVERAGE_RATIO, Sensitivity, _ols, t95
from joulehouse.models.settings import SensitivitySettings
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.lake_contract import reading_partitions
from joulehouse.warehouse.sqlio import relation_exists, replace_day_rows

TYPICAL_PARTS = {"training-dense": (0.18, -0.62, 0.41), "inference serving": (0.12, -0.33, 0.57)}
CLASS_REFERENCE = {"throughput": "training-dense", "latency-sensitive": "inference serving"}
PART_QUANTITIES = ("joint_part_pue", "joint_part_idle_share", "joint_part_network_bandwidth")
PART_UNITS = ("d PUE / d ln(power)", "d (1 - utilization) / d ln(power)", "d occupancy / d ln(power)")
S_UNIT = "dPUE/dlnE + w1 d(1-util)/dlnE + w2 dBW/dlnE"
MIN_SITE_HOURS = 4
# intercept, load and temperature with at least two degrees of freedom left
MIN_HOURS_WITH_TEMPERATURE = 5


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
    df: float  # the residual degrees of freedom its std_error was read with (inf: none to correct for)


def sum_df(terms: Sequence[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of independent terms given as (variance, df)."""
    total = sum(v for v, _ in terms)
    spread = sum(v * v / df for v, df in terms if np.isfinite(df) and v > 0)
    return float("inf") if spread <= 0 else total * total / spread


def read_gpu_hours(con: duckdb.DuckDBPyConnection, day: dt.date) -> list[dict]:
    """The day's rows of joint_sensitivity_gpu_hours.sql (the inputs of S), as dicts; the week of
    jobs partitions it reads checked against the lake contract first."""
    with reading_partitions(con, "jobs", day - dt.timedelta(days=7), day):
        cursor = con.execute(load_sql("joint_sensitivity_gpu_hours"), {"day": day, "min_coverage_ratio": MIN_COVERAGE_RATIO})
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor.fetchall()]


def read_site_pue_hours(con: duckdb.DuckDBPyConnection, day: dt.date) -> list[tuple]:
    """The day's site-hours the PUE part is fitted from (sensitivity_pue_hourly.sql); none without PUE."""
    if not (relation_exists(con, "fct_pue_hourly") and relation_exists(con, "raw_facility_samples")):
        return []
    return con.execute(load_sql("sensitivity_pue_hourly"), {"day": day, "min_coverage_ratio": MIN_COVERAGE_RATIO}).fetchall()


def site_pue_parts(con: duckdb.DuckDBPyConnection, day: dt.date, hours: Sequence[dt.datetime] | None = None
                   ) -> dict[str, Estimate]:
    """Per site: d PUE / d ln(IT load), outdoor temperature held fixed where it varied (OLS)."""
    return fit_site_pue_parts(read_site_pue_hours(con, day), hours)


def fit_site_pue_parts(rows: Sequence[tuple], hours: Sequence[dt.datetime] | None = None) -> dict[str, Estimate]:
    """site_pue_parts over site-hours already read (read_site_pue_hours), those of `hours` when given."""
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
        out[site] = Estimate(float(beta[1]), float(se[1]), len(site_rows), 1, float(df))
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
    terms = [((w * sites[s].std_error) ** 2, sites[s].df) for s, w in weights.items()]
    se = float(np.sqrt(sum(v for v, _ in terms)))
    return Estimate(value, se, sum(sites[s].n_obs for s in weights), len(weights), sum_df(terms))


def _scopes(rows: Sequence[dict]) -> dict[str, list[dict]]:
    scopes: dict[str, list[dict]] = {"fleet": list(rows)}
    for r in rows:
        if r["workload_class"]:
            scopes.setdefault(r["workload_class"], []).append(r)
    return scopes


def _row(day, quantity, scope, value, se, n_obs, n_groups, method, unit, weights=None, typical=None,
         df: float = float("inf")) -> Sensitivity:
    reference = CLASS_REFERENCE.get(scope)
    q = t95(df)
    return Sensitivity(day, quantity, scope, float(value), float(value - q * se), float(value + q * se), float(se),
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
        point, se, draws, method, n_gpus, parts_df = fitted
        typical = TYPICAL_PARTS.get(CLASS_REFERENCE.get(scope, ""))
        if np.isfinite(point[2]):
            out.append(_row(day, "energy_elasticity_to_network_bandwidth", scope, point[2], se[2], len(scope_rows),
                            n_gpus, method, "d ln(energy) / d ln(occupancy)"))
        pue = class_pue_part(scope_rows, sites)
        parts = [(PART_QUANTITIES[1], point[0], se[0]), (PART_QUANTITIES[2], point[1], se[1])]
        for (quantity, value, s), unit, k in zip(parts, PART_UNITS[1:], (1, 2)):
            out.append(_row(day, quantity, scope, value, s, len(scope_rows), n_gpus, method, unit,
                            typical=typical[k] if typical else None, df=parts_df))
        if pue is None:
            continue
        out.append(_row(day, PART_QUANTITIES[0], scope, pue.value, pue.std_error, pue.n_obs, pue.n_groups, "ols",
                        PART_UNITS[0], typical=typical[0] if typical else None, df=pue.df))
        combined = weights.utilization * draws[:, 0] + weights.network_bandwidth * draws[:, 1]
        s_value = pue.value + weights.utilization * point[0] + weights.network_bandwidth * point[1]
        s_terms = [(pue.std_error ** 2, pue.df), (float(np.var(combined, ddof=1)), parts_df)]
        s_se = float(np.sqrt(sum(v for v, _ in s_terms)))
        s_typical = (typical[0] + weights.utilization * typical[1] + weights.network_bandwidth * typical[2]
                     if typical else None)
        out.append(_row(day, "joint_sensitivity_s", scope, s_value, s_se, len(scope_rows), n_gpus,
                        f"pue-ols+{method}", S_UNIT, weights, s_typical, df=sum_df(s_terms)))
    return out


def sliding_window_day(con: duckdb.DuckDBPyConnection, day: dt.date, weights: Weights, window_hours: int, *,
                       gpu_hours: list[dict] | None = None) -> list[dict]:
    """fct_sensitivity_hourly rows of `day`: S and its parts over the `window_hours` hours ending at
    each hour of the day (the day's own hours: the first windows are shorter, and say so).
    `gpu_hours` as in joint_sensitivities."""
    if not relation_exists(con, "fct_link_bandwidth_hourly"):
        return []
    rows = read_gpu_hours(con, day) if gpu_hours is None else gpu_hours
    hours = sorted({r["hour_at"] for r in rows})
    site_hours = read_site_pue_hours(con, day)  # once: each window fits its own hours of them
    out: list[dict] = []
    for end in hours:
        start = end - dt.timedelta(hours=window_hours - 1)
        in_window = [r for r in rows if start <= r["hour_at"] <= end]
        window = [h for h in hours if start <= h <= end]
        sites = fit_site_pue_parts(site_hours, window)
        for scope, scope_rows in _scopes(in_window).items():
            if len(scope_rows) < MIN_GPU_HOURS:
                continue
            fitted = _ols_slope(scope_rows)
            if fitted is None:
                continue
            (idle, bw), (idle_se, bw_se), df = fitted
            pue = class_pue_part(scope_rows, sites)
            base = {"day": day, "hour_at": end, "window_hours": len(window), "scope": scope,
                    "n_obs": len(scope_rows), "weight_utilization": None, "weight_network_bandwidth": None}
            values = [(PART_QUANTITIES[1], idle, idle_se, df), (PART_QUANTITIES[2], bw, bw_se, df)]
            if pue is not None:
                values.append((PART_QUANTITIES[0], pue.value, pue.std_error, pue.df))
                s_terms = [(pue.std_error ** 2, pue.df), ((weights.utilization * idle_se) ** 2, df),
                           ((weights.network_bandwidth * bw_se) ** 2, df)]
                values.append(("joint_sensitivity_s", pue.value + weights.utilization * idle
                               + weights.network_bandwidth * bw, float(np.sqrt(sum(v for v, _ in s_terms))),
                               sum_df(s_terms)))
            for quantity, value, se, value_df in values:
                q = t95(value_df)
                row = {**base, "quantity": quantity, "estimate": float(value), "ci_low": float(value - q * se),
                       "ci_high": float(value + q * se)}
                if quantity == "joint_sensitivity_s":
                    row.update(weight_utilization=weights.utilization, weight_network_bandwidth=weights.network_bandwidth)
                out.append(row)
    con.execute(load_sql("fct_sensitivity_hourly"))
    replace_day_rows(con, day, {"fct_sensitivity_hourly": out})
    return out
