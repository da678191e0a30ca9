"""Sensitivities of fleet energy and PUE, with 95% confidence intervals, per day (fct_sensitivity_daily).

The seed formula S = dPUE/dE + w1 d(1-util)/dE + w2 dBW/dE needs its parts measured; these are:
- the elasticity of hourly GPU energy to utilisation and to memory bandwidth: the log-log
  regression ln E = a_model + e_util ln(activity) + e_dram ln(DRAM activity) over busy GPU-hours,
  with one intercept per GPU model (a fixed effect: an H100 hour is not an A100 hour). SQL sums
  the sufficient statistics per GPU (models/sql/sensitivity_energy_gpu_stats.sql); numpy solves it,
  and the error comes from a bootstrap over GPUs (hours of one GPU are correlated, GPUs much
  less so, so resampling whole GPUs does not overstate the evidence as per-hour OLS errors would),
  read as a cluster-robust error of that many GPUs (sensitivity_fit.gpu_bootstrap_error);
- PUE against outdoor temperature (1/C) and IT load (elasticity), per site: OLS on the day's
  site-hours of fct_pue_hourly, t-based intervals.
Each is an association over one day's variation, not an experiment: a day whose outdoor
temperature barely moved gives a wide interval, which is the honest answer.
"""

from __future__ import annotations

import datetime as dt
import dataclasses

import duckdb
import numpy as np

from joulehouse.models.activity import create_activity_view
from joulehouse.models.joint_sensitivity import Weights, joint_sensitivities, read_gpu_hours, sliding_window_day
from joulehouse.models.sensitivity_fit import (BOOTSTRAP_REPS, MIN_ACTIVITY_RATIO, MIN_COVERAGE_RATIO,
                                               MIN_GPUS_FOR_BOOTSTRAP, Sensitivity, _ols, _within_model_solution,
                                               gpu_bootstrap_error, t95)
from joulehouse.models.settings import SensitivitySettings
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import relation_exists, replace_day_rows

def energy_elasticities(con: duckdb.DuckDBPyConnection, day: dt.date, *, bootstrap_reps: int = BOOTSTRAP_REPS,
                        seed: int = 0) -> list[Sensitivity]:
    """Elasticities of hourly GPU energy to utilisation and DRAM activity for `day` (unitless)."""
    create_activity_view(con, day)
    rows = con.execute(load_sql("sensitivity_energy_gpu_stats"),
                       {"day": day, "min_coverage_ratio": MIN_COVERAGE_RATIO,
                        "min_activity_ratio": MIN_ACTIVITY_RATIO}).fetchall()
    names = ("gpu_uuid", "gpu_model", "n", "s_1", "s_2", "s_y", "s_11", "s_12", "s_22", "s_1y", "s_2y", "s_yy")
    return elasticities_from_gpu_stats(day, [dict(zip(names, r)) for r in rows], bootstrap_reps=bootstrap_reps,
                                       seed=seed)


def elasticities_from_gpu_stats(day: dt.date, gpus: list[dict], *, bootstrap_reps: int = BOOTSTRAP_REPS,
                                seed: int = 0) -> list[Sensitivity]:
    """energy_elasticities from the per-GPU sums of sensitivity_energy_gpu_stats.sql (one dict a GPU)."""
    solution = _within_model_solution(gpus)
    if solution is None:
        return []
    beta, inverse, sse, n, n_models = solution
    df = n - 2 - n_models
    ols_se = np.sqrt(np.diag(inverse) * sse / df)
    draws = []
    if len(gpus) >= MIN_GPUS_FOR_BOOTSTRAP:
        rng = np.random.default_rng(seed)
        for _ in range(bootstrap_reps):
            # GPUs resampled with replacement; a resampled GPU gets its own fixed effect's model
            # only through its model, as in the fit.
            sample = [gpus[i] for i in rng.integers(0, len(gpus), len(gpus))]
            s = _within_model_solution(sample)
            if s is not None:
                draws.append(s[0])
    # fewer than two resamples that could be solved (few GPUs whose activity varies): the OLS interval
    if len(draws) >= 2:
        se, df = gpu_bootstrap_error(np.array(draws), len(gpus))
        method = "ols-fe+gpu-bootstrap"
    else:
        se, method = ols_se, "ols-fe"
    t = t95(df)
    low, high = beta - t * se, beta + t * se
    quantities = ("energy_elasticity_to_utilization", "energy_elasticity_to_memory_bandwidth")
    return [Sensitivity(day, q, "fleet", float(beta[i]), float(low[i]), float(high[i]), float(se[i]), n, len(gpus),
                        method, "d ln(energy) / d ln(ratio)") for i, q in enumerate(quantities)]


def pue_sensitivities(con: duckdb.DuckDBPyConnection, day: dt.date) -> list[Sensitivity]:
    """Per site: dPUE/d outdoor C (1/C) and the elasticity of PUE to IT load, both with the other held fixed."""
    if not (relation_exists(con, "fct_pue_hourly") and relation_exists(con, "raw_facility_samples")):
        return []
    rows = con.execute(load_sql("sensitivity_pue_hourly"), {"day": day, "min_coverage_ratio": MIN_COVERAGE_RATIO}).fetchall()
    out: list[Sensitivity] = []
    for site in sorted({r[0] for r in rows}):
        site_rows = [r for r in rows if r[0] == site and r[4] is not None and r[3] is not None and r[3] > 0]
        if len(site_rows) < 6:
            continue
        pue = np.array([r[2] for r in site_rows], float)
        load = np.array([r[3] for r in site_rows], float)
        temp = np.array([r[4] for r in site_rows], float)
        regressors = [c for c in (temp, load) if np.ptp(c) > 1e-9 * max(1.0, np.abs(c).max())]
        if len(regressors) < 2:
            continue  # nothing varied: no slope to measure
        beta, se, df = _ols(np.column_stack([temp, load]), pue)
        t = t95(df)
        scale = load.mean() / pue.mean()  # slope (1/kW) -> elasticity at the day's mean point
        for quantity, b, s, k, unit in (("pue_per_outdoor_c", beta[1], se[1], 1.0, "1/C"),
                                        ("pue_elasticity_to_it_load", beta[2], se[2], scale, "d ln(PUE) / d ln(IT kW)")):
            out.append(Sensitivity(day, quantity, site, float(b * k), float((b - t * s) * k), float((b + t * s) * k),
                                   float(s * k), len(site_rows), 1, "ols", unit))
    return out


def sensitivity_day(con: duckdb.DuckDBPyConnection, day: dt.date, settings: SensitivitySettings | None = None, *,
                    bootstrap_reps: int = BOOTSTRAP_REPS, seed: int = 0) -> list[Sensitivity]:
    """Measure every sensitivity of `day` (the joint S and its parts too, where the day's link
    occupancy is built: models.bandwidth) and replace that day's rows of fct_sensitivity_daily
    and fct_sensitivity_hourly (S over sliding windows, `settings.window_hours` long)."""
    for name in ("stg_gpu_samples", "fct_gpu_energy_hourly"):
        if not relation_exists(con, name):
            raise ValueError(f"relation {name!r} is missing: build the warehouse day {day} first")
    settings = settings or SensitivitySettings()
    weights = Weights.from_settings(settings)
    found = energy_elasticities(con, day, bootstrap_reps=bootstrap_reps, seed=seed) + pue_sensitivities(con, day)
    # The day's GPU-hours are read once for both the day's S and its sliding windows (0.2-0.4 s a read).
    gpu_hours = read_gpu_hours(con, day) if relation_exists(con, "fct_link_bandwidth_hourly") else None
    found += joint_sensitivities(con, day, weights, bootstrap_reps=bootstrap_reps, seed=seed, gpu_hours=gpu_hours)
    con.execute(load_sql("fct_sensitivity_daily"))
    con.execute(load_sql("fct_sensitivity_daily_columns"))
    replace_day_rows(con, day, {"fct_sensitivity_daily": [dataclasses.asdict(s) for s in found]})
    sliding_window_day(con, day, weights, settings.window_hours, gpu_hours=gpu_hours)
    return found
