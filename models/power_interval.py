"""Where perf per watt is highest: the best power-limit interval per GPU model and workload bottleneck.

For each GPU model with a fit that passed its gate, and each bottleneck its busy samples showed
that day (models/sql/power_interval_profiles.sql), the cap model (models.caps: the clock under a
limit from the fitted power model, the slowdown from the bottleneck) predicts energy per unit of
work and run time at every limit from the device minimum to its default, in `step_w` steps.
Perf per watt is work per joule, so the best limit is the least energy per work; the interval is
every limit within `tolerance` of it (the flat bottom of the curve, where the choice is free).
Writes fct_power_interval and fct_energy_vs_limit (the curves, which the HTML report draws).
With the simulator's cubic dynamic power and small static share the unconstrained optimum sits
near the minimum limit with a large slowdown; `max_slowdown_pct` bounds the search where run time
matters (models.recommend does the cost-weighted choice per GPU).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

import duckdb
import numpy as np

from joulehouse.models.activity import create_activity_view
from joulehouse.models.caps import PCIE_LINK_GBPS, WorkloadProfile, energy_vs_limit
from joulehouse.models.power import coefficients_of, load_fit
from joulehouse.models.recommend import device_limits_w
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import records, replace_day_rows

STEP_W = 5.0
TOLERANCE = 0.01  # limits within 1% of the least energy per work count as optimal
MIN_SAMPLES = 30  # a bottleneck seen in fewer busy samples gets no curve
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PowerInterval:
    """One model x bottleneck: the best limit (W), its near-optimal interval and the gain over the default."""

    day: dt.date
    gpu_model: str
    bottleneck: str
    busy_share: float
    best_limit_w: float
    best_limit_w_low: float
    best_limit_w_high: float
    default_limit_w: float
    perf_per_watt_gain_pct: float
    slowdown_at_best_pct: float



def power_interval_day(con: duckdb.DuckDBPyConnection, day: dt.date, *, step_w: float = STEP_W,
                       tolerance: float = TOLERANCE, max_slowdown_pct: float | None = None,
                       ) -> tuple[list[PowerInterval], list[dict]]:
    """Compute and store the day's intervals and curves; returns (intervals, curve rows).
    `max_slowdown_pct` (None: no bound) keeps only limits whose run time grows at most that much."""
    create_activity_view(con, day)
    profiles = records(con.execute(load_sql("power_interval_profiles"), {"day": day, "pcie_link_gbps": PCIE_LINK_GBPS}))
    intervals: list[PowerInterval] = []
    curve_rows: list[dict] = []
    # A GPU whose log names no model has no device limits to sweep: it gets no curve.
    for model in sorted({p["gpu_model"] for p in profiles if p["gpu_model"] is not None}):
        fit = load_fit(con, model, day)
        coef = coefficients_of(fit) if fit else None
        if coef is None or not fit["passed_gate"]:
            continue  # no trustworthy model: no curve (the power-model table says why)
        rows = [p for p in profiles if p["gpu_model"] == model and p["n_samples"] >= MIN_SAMPLES]
        if not rows:
            continue
        dominant = max(rows, key=lambda p: p["n_samples"])["bottleneck"]
        try:
            default_w, min_w, _, _ = device_limits_w(model, rows[0]["max_power_limit_w"])
        except ValueError as exc:
            # No limits to sweep (an imported log of an unlisted model without power.limit): no
            # curve for this model, as models.recommend gives its GPUs no setting; the day goes on.
            log.warning("no power-limit curve for %s on %s: %s", model, day, exc)
            continue
        limits = np.arange(min_w, default_w + 1e-9, step_w)
        if limits[-1] != default_w:
            limits = np.append(limits, default_w)
        for p in rows:
            profile = WorkloadProfile(activity_ratio=float(p["activity_ratio"]), memory_ratio=float(p["memory_ratio"]),
                                      pcie_gbps=float(p["pcie_gbps"]), temp_c=float(p["temp_c"] or 60.0))
            curve = energy_vs_limit(coef, profile, limits)
            at_default = curve[-1]
            base_time = 1.0 + at_default.slowdown_pct / 100.0
            energy = np.array([o.energy_ratio for o in curve]) / at_default.energy_ratio
            times = np.array([1.0 + o.slowdown_pct / 100.0 for o in curve]) / base_time
            allowed = np.ones(len(limits), bool) if max_slowdown_pct is None else times <= 1.0 + max_slowdown_pct / 100.0
            allowed[-1] = True  # the default limit always qualifies
            masked = np.where(allowed, energy, np.inf)
            best = int(np.argmin(masked))
            near = limits[masked <= energy[best] * (1.0 + tolerance)]
            intervals.append(PowerInterval(
                day=day, gpu_model=model, bottleneck=p["bottleneck"], busy_share=float(p["busy_share"]),
                best_limit_w=float(limits[best]), best_limit_w_low=float(near.min()), best_limit_w_high=float(near.max()),
                default_limit_w=float(default_w), perf_per_watt_gain_pct=float(100.0 * (1.0 / energy[best] - 1.0)),
                slowdown_at_best_pct=float(100.0 * (times[best] - 1.0))))
            for o, e, t in zip(curve, energy, times):
                curve_rows.append({"day": day, "gpu_model": model, "bottleneck": p["bottleneck"],
                                   "is_dominant_bottleneck": p["bottleneck"] == dominant,
                                   "power_limit_w": float(o.power_limit_w), "relative_energy": float(e),
                                   "relative_time": float(t), "power_w": float(o.power_w),
                                   "energy_kwh": float(o.power_w * t / 1000.0)})
    _store(con, day, intervals, curve_rows)
    return intervals, curve_rows


def _store(con: duckdb.DuckDBPyConnection, day: dt.date, intervals: list[PowerInterval], curve_rows: list[dict]) -> None:
    con.execute(load_sql("fct_power_interval"))
    con.execute(load_sql("fct_energy_vs_limit"))
    curve_columns = list(curve_rows[0]) if curve_rows else []
    replace_day_rows(con, day, {
        "fct_power_interval": (
            ["day", "gpu_model", "bottleneck", "busy_share", "best_limit_w", "best_limit_w_low", "best_limit_w_high",
             "default_limit_w", "perf_per_watt_gain_pct", "slowdown_at_best_pct"],
            [[i.day, i.gpu_model, i.bottleneck, i.busy_share, i.best_limit_w, i.best_limit_w_low, i.best_limit_w_high,
              i.default_limit_w, i.perf_per_watt_gain_pct, i.slowdown_at_best_pct] for i in intervals]),
        "fct_energy_vs_limit": (curve_columns, [[r[n] for n in curve_columns] for r in curve_rows]),
    })
