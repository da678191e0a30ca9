"""The best power interval per GPU model, workload bottleneck and workload class: the energy-optimal
range of power limits within the class's slowdown bound.

For each GPU model with a fit that passed its gate, and each bottleneck its busy samples showed
that day (models/sql/power_interval_profiles.sql: activity and memory activity in the measures the
fit reads, SM and DRAM activity or NVML's utilisations, whichever the GPU's stream is; busy samples
without the fit's activity are in no bottleneck's curve, and logged; a memory, PCIe or temperature
mean a bottleneck's samples never read is its model's busy mean of the day, as the recommender
fills a GPU's, or, where none exists and the fit weighs it, no curve), the cap model (models.caps:
the clock under a limit from the fitted power model, the slowdown from the bottleneck) predicts
energy per unit of work and run time at every limit from the device minimum to its default, in
`step_w` steps (the curve, fct_energy_vs_limit, which the report draws). Those limits are the ones
models.recommend sets each GPU's cap within (models.device_limits: what the device reports of
itself first), of the model's GPU with the highest default. The interval is chosen
as models.recommend chooses a cap, so the two agree: among the limits the recommender may set (from the default down
to `min_limit_share_of_default` of it) whose slowdown stays within the class's bound
([recommend].max_slowdown_*_pct; throughput and background, the classes that get caps; judged on
the heavier half of the busy samples, as the recommender judges it), the one
with the least energy per work is the best, and the interval is every such limit within
`tolerance` of it (the flat bottom of the curve, where the choice is free). Without a bound the
optimum of a steep f^alpha dynamic term sits near the device floor with a slowdown no class
accepts (issue 21: 110 W on a 400 W A100 at 86%). `interval_on_curve` is that choice on any
curve, so the same rule is checked on measured sweeps (tests/models/test_power_interval_sweeps.py).

The recommender scores each GPU on its own day's mix of work, all bottlenecks together, so on a
model whose GPUs mix kinds of work the caps it sets match no single bottleneck's interval (the
demo's H200s, 52% compute-bound and 40% memory-bound: caps 350 W, the memory-bound interval, next
to 410-415 W compute-bound). A row per model and class with bottleneck 'mix' gives the interval of
that class's GPUs together, scored as models.recommend scores a GPU (models.cap_scoring: each
GPU's tenths of activity, weighted by its busy hours, the bound on the heavier half): the row the
headline's caps follow. The bottleneck rows say what each kind of work alone would call for.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

import duckdb
import numpy as np

from joulehouse.models.activity import create_activity_view
from joulehouse.models.bandwidth import create_capacity_table, pcie_link_gbps
from joulehouse.models.cap_scoring import activity_bins, score_limits
from joulehouse.models.caps import PCIE_LINK_GBPS, WorkloadProfile, energy_vs_limit
from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.power import coefficients_of
from joulehouse.models.device_limits import (EarlierDefaults, device_limits_w, earlier_default_limits_w, limit_seen_w,
                                             reported_limits_w)
from joulehouse.models.recommend import slowdown_bound_pct, workload_class_of
from joulehouse.models.recommend_inputs import (ACTIVITY_KIND_OF_FEATURE_SET, PROFILE_MEASURES, MissingMeasure,
                                               fit_activity_models, gpu_day_profiles, gpu_profile, gpu_workload_classes,
                                               latest_fits, with_stand_ins)
from joulehouse.models.settings import RecommendSettings
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import records, replace_day_rows

STEP_W = 5.0
TOLERANCE = 0.01  # limits within 1% of the least energy per work count as optimal
MIN_SAMPLES = 30  # a bottleneck seen in fewer busy samples gets no curve
CAPPED_CLASSES = ("throughput", "background")  # latency-sensitive work keeps its clocks
MIX = "mix"  # the bottleneck of the rows that score a class's GPUs on their whole day, as the recommender does
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PowerInterval:
    """One model x bottleneck x class: the best limit (W), its near-optimal interval and the gain over the default."""

    day: dt.date
    gpu_model: str
    bottleneck: str
    workload_class: str
    max_slowdown_pct: float
    busy_share: float
    best_limit_w: float
    best_limit_w_low: float
    best_limit_w_high: float
    default_limit_w: float
    perf_per_watt_gain_pct: float
    slowdown_at_best_pct: float
    heavy_slowdown_at_best_pct: float


@dataclass(frozen=True)
class CurveInterval:
    """The choice on one curve: index of the best limit, the interval's ends (W)."""

    best: int
    low_w: float
    high_w: float


def interval_on_curve(limits_w: np.ndarray, energy: np.ndarray, times: np.ndarray, *, max_slowdown_pct: float | None,
                      floor_w: float = -np.inf, tolerance: float = TOLERANCE) -> CurveInterval:
    """Least energy per work among the limits at or above `floor_w` whose time (relative to the
    reference, 1.0) grows at most `max_slowdown_pct` (None: no bound); the fastest limit always
    qualifies (the highest did: a sweep fastest at 200 W then offered 260 W, 5.9% slower, under a
    2% bound). Ties go to the higher limit (no slowdown for nothing)."""
    limits_w, energy, times = (np.asarray(a, float) for a in (limits_w, energy, times))
    allowed = limits_w >= floor_w - 1e-9
    if max_slowdown_pct is not None:
        allowed &= times <= 1.0 + max_slowdown_pct / 100.0 + 1e-12
    fastest = np.flatnonzero(times == times.min())
    allowed[int(fastest[np.argmax(limits_w[fastest])])] = True
    masked = np.where(allowed, energy, np.inf)
    best = min(np.flatnonzero(allowed), key=lambda i: (round(float(masked[i]), 12), -limits_w[i]))
    near = limits_w[masked <= masked[best] * (1.0 + tolerance)]
    return CurveInterval(best=int(best), low_w=float(near.min()), high_w=float(near.max()))


def _group_side_measures(group: dict, model_gpus: list[dict], feature_set: str, coef: PowerCoefficients) -> dict:
    """A bottleneck group's memory activity, PCIe traffic (GB/s) and temperature (C) means in the
    fit's measures, a measure none of its samples read filled as models.recommend fills a GPU's
    (with_stand_ins: the model's busy mean of the day, else the value at which an unweighed term
    weighs nothing). Raises MissingMeasure where neither can stand in: taken as 0 or 60 C, the
    group was drawn at an operating point nobody measured."""
    memory = PROFILE_MEASURES[feature_set][1]
    model_means = next(iter(model_gpus), {})  # the model_* columns: the same on each GPU of the model
    filled, notes = with_stand_ins(
        {"gpu_model": group["gpu_model"], memory: group["memory_ratio"], "pcie_gbps": group["pcie_gbps"],
         "temp_c": group["temp_c"]} | {f"model_{c}": model_means.get(f"model_{c}") for c in (memory, "pcie_gbps", "temp_c")},
        feature_set, coef)
    for note in notes:
        log.info("%s, %s samples: %s", group["gpu_model"], group["bottleneck"], note)
    return {"memory_ratio": filled[memory], "pcie_gbps": filled["pcie_gbps"], "temp_c": filled["temp_c"]}


def _heavy_or_group(heavy: float | None, group: float) -> float:
    """The heavier half's mean of a measure, or the whole group's where the heavier half read none."""
    return float(group if heavy is None else heavy)


def power_interval_day(con: duckdb.DuckDBPyConnection, day: dt.date, settings: RecommendSettings | None = None, *,
                       step_w: float = STEP_W, tolerance: float = TOLERANCE, max_slowdown_pct: float | None = None,
                       ) -> tuple[list[PowerInterval], list[dict]]:
    """Compute and store the day's intervals and curves; returns (intervals, curve rows).
    The bound is each class's from `settings` (defaults: RecommendSettings()); `max_slowdown_pct`
    replaces it for every class (a what-if)."""
    settings = settings or RecommendSettings()
    fits = latest_fits(con, day)
    gpus = gpu_day_profiles(con, day, fits=fits)  # the recommender's view of each GPU (it makes the activity view too)
    classes = gpu_workload_classes(con, day)[0]
    create_activity_view(con, day)
    create_capacity_table(con, sorted({g["gpu_model"] for g in gpus if g["gpu_model"] is not None}))
    # In the measures each model's fit reads, as the recommender's tenths are: the stream's may be another.
    profiles = records(con.execute(load_sql("power_interval_profiles"), {"day": day, "pcie_link_gbps": PCIE_LINK_GBPS}
                                   | fit_activity_models(fits)))
    earlier = earlier_default_limits_w(con, day)
    intervals: list[PowerInterval] = []
    curve_rows: list[dict] = []
    # A GPU whose log names no model has no device limits to sweep: it gets no curve.
    for model in sorted({p["gpu_model"] for p in profiles if p["gpu_model"] is not None}):
        fit = fits.get(model)
        coef = coefficients_of(fit) if fit else None
        if coef is None or not fit["passed_gate"]:
            continue  # no trustworthy model: no curve (the power-model table says why)
        for unread in (p for p in profiles if p["gpu_model"] == model and p["bottleneck"] is None):
            log.warning("%s on %s: %d busy samples (%.0f%%) lack the %s activity its power model (%s) reads: "
                        "in no bottleneck's curve", model, day, unread["n_samples"], 100 * unread["busy_share"],
                        ACTIVITY_KIND_OF_FEATURE_SET[fit["feature_set"]], fit["feature_set"])
        rows = [p for p in profiles if p["gpu_model"] == model and p["bottleneck"] is not None
                and p["n_samples"] >= MIN_SAMPLES]
        if not rows:
            continue
        dominant = max(rows, key=lambda p: p["n_samples"])["bottleneck"]
        try:
            default_w, min_w = _model_limits_w(model, [g for g in gpus if g["gpu_model"] == model], earlier, day)
        except ValueError as exc:
            # No limits to sweep (an imported log of an unlisted model without power.limit): no
            # curve for this model, as models.recommend gives its GPUs no setting; the day goes on.
            log.warning("no power-limit curve for %s on %s: %s", model, day, exc)
            continue
        limits = np.arange(min_w, default_w + 1e-9, step_w)
        if limits[-1] != default_w:
            limits = np.append(limits, default_w)
        floor_w = max(min_w, settings.min_limit_share_of_default * default_w)
        mine = [g for g in gpus if g["gpu_model"] == model]
        for workload_class in CAPPED_CLASSES:
            bound = slowdown_bound_pct(workload_class, settings) if max_slowdown_pct is None else max_slowdown_pct
            mix = _mix_interval(day, model, coef, fit["feature_set"], [g for g in mine if workload_class_of(g, classes) ==
                                workload_class], mine, workload_class, bound, limits, floor_w, default_w, tolerance)
            if mix is not None:
                intervals.append(mix)
        for p in rows:
            try:
                side = _group_side_measures(p, mine, fit["feature_set"], coef)
            except MissingMeasure as exc:
                log.warning("%s on %s: no %s curve: %s", model, day, p["bottleneck"], exc)
                continue
            profile = WorkloadProfile(activity_ratio=float(p["activity_ratio"]), memory_ratio=side["memory_ratio"],
                                      pcie_gbps=side["pcie_gbps"], temp_c=side["temp_c"],
                                      pcie_link_gbps=pcie_link_gbps(model))
            curve = energy_vs_limit(coef, profile, limits)
            at_default = curve[-1]
            base_time = 1.0 + at_default.slowdown_pct / 100.0
            energy = np.array([o.energy_ratio for o in curve]) / at_default.energy_ratio
            times = np.array([1.0 + o.slowdown_pct / 100.0 for o in curve]) / base_time
            # The bound holds for the heavier half of the work, as models.recommend applies it: a
            # cap bites in the heavy phases, and the jobs it slows most must stay within it too.
            heavy = WorkloadProfile(
                activity_ratio=_heavy_or_group(p["heavy_activity_ratio"], profile.activity_ratio),
                memory_ratio=_heavy_or_group(p["heavy_memory_ratio"], profile.memory_ratio),
                pcie_gbps=_heavy_or_group(p["heavy_pcie_gbps"], profile.pcie_gbps),
                temp_c=_heavy_or_group(p["heavy_temp_c"], profile.temp_c), pcie_link_gbps=profile.pcie_link_gbps)
            heavy_curve = energy_vs_limit(coef, heavy, limits)
            heavy_times = (np.array([1.0 + o.slowdown_pct / 100.0 for o in heavy_curve])
                           / (1.0 + heavy_curve[-1].slowdown_pct / 100.0))
            for workload_class in CAPPED_CLASSES:
                bound = slowdown_bound_pct(workload_class, settings) if max_slowdown_pct is None else max_slowdown_pct
                choice = interval_on_curve(limits, energy, heavy_times, max_slowdown_pct=bound, floor_w=floor_w,
                                           tolerance=tolerance)
                intervals.append(PowerInterval(
                    day=day, gpu_model=model, bottleneck=p["bottleneck"], workload_class=workload_class,
                    max_slowdown_pct=float(bound), busy_share=float(p["busy_share"]),
                    best_limit_w=float(limits[choice.best]), best_limit_w_low=choice.low_w,
                    best_limit_w_high=choice.high_w, default_limit_w=float(default_w),
                    perf_per_watt_gain_pct=float(100.0 * (1.0 / energy[choice.best] - 1.0)),
                    slowdown_at_best_pct=float(100.0 * (times[choice.best] - 1.0)),
                    heavy_slowdown_at_best_pct=float(100.0 * (heavy_times[choice.best] - 1.0))))
            for o, e, t in zip(curve, energy, times):
                curve_rows.append({"day": day, "gpu_model": model, "bottleneck": p["bottleneck"],
                                   "is_dominant_bottleneck": p["bottleneck"] == dominant,
                                   "power_limit_w": float(o.power_limit_w), "relative_energy": float(e),
                                   "relative_time": float(t), "power_w": float(o.power_w),
                                   "energy_kwh": float(o.power_w * t / 1000.0)})
    _store(con, day, intervals, curve_rows)
    return intervals, curve_rows


def _model_limits_w(model: str, model_gpus: list[dict], earlier: EarlierDefaults, day: dt.date) -> tuple[float, float]:
    """The (default, min) W a model's curve sweeps: those of its GPU with the highest default (the
    highest minimum among such GPUs), each GPU's limits taken as models.recommend takes them (the
    device's own reports first, then its limit from before the agent's caps, then the catalogue).
    Drawn from the catalogue and the readings alone, a 500 W board capped at 300 W had a curve
    ending at 400 W, and an unknown model reporting a 150 W minimum one starting at a guessed
    200 W, where the recommender capped it at 175 W; from the first bottleneck's samples, under the
    caps, a 400 W model's curve ended at its 250 W cap; from the highest busy reading, one mistyped
    4000 W reading was every curve's default. Raises ValueError where no GPU's are known."""
    limits_w, left_out = [], {}
    for g in model_gpus:
        seen_w, source = limit_seen_w(g["gpu_uuid"], model, g["max_power_limit_w"], earlier)
        try:
            limits_w.append(device_limits_w(model, seen_w, source, reported_limits_w(g))[:2])
        except ValueError as exc:
            left_out.setdefault(str(exc), []).append(g["gpu_uuid"])
    if not limits_w:
        raise ValueError("; ".join(left_out) or f"no GPU of {model} profiled that day")
    for why, uuids in left_out.items():  # as models.recommend gives them no setting
        log.warning("%s on %s: %d GPU(s) left out of the curve's limits (%s%s): %s", model, day, len(uuids),
                    ", ".join(uuids[:3]), ", ..." if len(uuids) > 3 else "", why)
    # One curve per model: a lower default's curve leaves the higher boards' limits above it unscored.
    return max(limits_w)


def _mix_interval(day: dt.date, model: str, coef: PowerCoefficients, feature_set: str, gpus: list[dict],
                  model_gpus: list[dict], workload_class: str, bound: float, limits: np.ndarray, floor_w: float,
                  default_w: float, tolerance: float) -> PowerInterval | None:
    """The class's GPUs of one model scored together on their day (models.recommend's bins, each
    GPU's weighted by its busy hours); None when none was busy."""
    bins, busy_h = [], 0.0
    # A measure no GPU of the model read leaves every busy GPU out for the same reason: one line per
    # reason, not one per GPU (a fleet of 1000 A100s without temperature wrote 1000 a day).
    left_out: dict[str, list[str]] = {}
    for g in gpus:
        if g["busy_hours"] is None or g["busy_hours"] <= 0:
            continue  # no activity reading (how busy is unknown) or idle: nothing to score
        if g.get(PROFILE_MEASURES[feature_set][0]) is None:
            continue  # busy without the fit's activity: unscorable, not idle (logged with the model's unread samples)
        try:
            g, _ = with_stand_ins(g, feature_set, coef)  # the recommender's reasons say what stood in
        except MissingMeasure as exc:
            left_out.setdefault(str(exc), []).append(g["gpu_uuid"])
            continue
        hours = float(g["busy_hours"])
        profile = gpu_profile(g, feature_set)
        if profile.activity_ratio <= 0:
            continue
        bins += [(b, w * hours) for b, w in activity_bins(g, profile, coef.f_max_mhz)]
        busy_h += hours
    for why, uuids in left_out.items():
        log.warning("%s on %s: %d GPU(s) left out of the %s mix (%s%s): %s", model, day, len(uuids), workload_class,
                    ", ".join(uuids[:3]), ", ..." if len(uuids) > 3 else "", why)
    if not bins:
        return None
    scored = score_limits(coef, [(b, w / busy_h) for b, w in bins], limits)
    at_default = scored[-1]
    energy = np.array([m.power_w * (1 + m.slowdown_pct / 100) for m in scored])
    energy /= energy[-1]
    times = np.array([1 + m.slowdown_pct / 100 for m in scored]) / (1 + at_default.slowdown_pct / 100)
    heavy = np.array([1 + m.heavy_slowdown_pct / 100 for m in scored]) / (1 + at_default.heavy_slowdown_pct / 100)
    choice = interval_on_curve(limits, energy, heavy, max_slowdown_pct=bound, floor_w=floor_w, tolerance=tolerance)
    model_busy_h = sum(float(g["busy_hours"]) for g in model_gpus if g["busy_hours"] is not None)
    return PowerInterval(
        day=day, gpu_model=model, bottleneck=MIX, workload_class=workload_class, max_slowdown_pct=float(bound),
        busy_share=busy_h / model_busy_h if model_busy_h > 0 else None,
        best_limit_w=float(limits[choice.best]), best_limit_w_low=choice.low_w, best_limit_w_high=choice.high_w,
        default_limit_w=float(default_w), perf_per_watt_gain_pct=float(100.0 * (1.0 / energy[choice.best] - 1.0)),
        slowdown_at_best_pct=float(100.0 * (times[choice.best] - 1.0)),
        heavy_slowdown_at_best_pct=float(100.0 * (heavy[choice.best] - 1.0)))


INTERVAL_COLUMNS = ("day", "gpu_model", "bottleneck", "workload_class", "max_slowdown_pct", "busy_share", "best_limit_w",
                    "best_limit_w_low", "best_limit_w_high", "default_limit_w", "perf_per_watt_gain_pct",
                    "slowdown_at_best_pct", "heavy_slowdown_at_best_pct")


def _store(con: duckdb.DuckDBPyConnection, day: dt.date, intervals: list[PowerInterval], curve_rows: list[dict]) -> None:
    con.execute(load_sql("fct_power_interval"))
    for column, kind in (("workload_class", "VARCHAR"), ("max_slowdown_pct", "DOUBLE"),
                         ("heavy_slowdown_at_best_pct", "DOUBLE")):  # tables from before
        con.execute(f"ALTER TABLE fct_power_interval ADD COLUMN IF NOT EXISTS {column} {kind}")
    con.execute(load_sql("fct_energy_vs_limit"))
    curve_columns = list(curve_rows[0]) if curve_rows else []
    replace_day_rows(con, day, {
        "fct_power_interval": (
            list(INTERVAL_COLUMNS), [[getattr(i, c) for c in INTERVAL_COLUMNS] for i in intervals]),
        "fct_energy_vs_limit": (curve_columns, [[r[n] for n in curve_columns] for r in curve_rows]),
    })
