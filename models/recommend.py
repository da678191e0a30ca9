"""Recommended power limit (or locked clock range) per GPU for one day.

For each GPU seen on `day`: its workload class is the class of the jobs it ran longest that day
(jobs relation), or, without jobs, 'throughput' when it was busy (activity > 5%) at least half of
the day's samples and 'background' otherwise. Latency-sensitive GPUs keep their clocks (default
limit). For the others, each candidate limit from the device default down to its minimum (in
`limit_step_w` steps; never above the default) is scored with the fitted power model and the
performance-under-cap model (models.caps) on the GPU's busy profile, by the cost of the same work:
    energy_kwh x price x PUE + energy_kwh x grid gCO2e/kWh x carbon price / 1e6
    + value_of_time x busy_hours x slowdown,
subject to the class's slowdown bound. Skipped, with the reason written: GPUs in do_not_touch (by
UUID or host), GPU models without a fit or whose fit failed its gate. When the GPU never draws
the chosen cap (decode-style loads), the cap would do nothing: a locked SM clock range is
suggested instead (the lowest clock within the slowdown bound as the maximum).
"""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np

from collectors.settings import RecommendSettings
from models.caps import MIN_CLOCK_RATIO, WorkloadProfile, outcome_under_limit, power_at_clock_w, time_ratio
from models.power import coefficients_of, load_fit, quoted_relation, relation_exists
from models.sql import load_sql

# NVML power limits (default, min, max W) by model, from real `nvidia-smi -q` output.
DEVICE_LIMITS_W = {
    "NVIDIA A100-SXM4-80GB": (400.0, 100.0, 400.0),
    "NVIDIA A100-SXM4-40GB": (400.0, 100.0, 400.0),
    "NVIDIA A100 80GB PCIe": (300.0, 150.0, 300.0),
    "NVIDIA H100 80GB HBM3": (700.0, 200.0, 700.0),
    "NVIDIA H200": (700.0, 200.0, 700.0),
    "NVIDIA L20": (350.0, 150.0, 350.0),
}
# Unknown model: the highest limit seen is the default, half of it the minimum (NVML minimums are
# 25-50% of the default on the models above); the reason says so.
UNKNOWN_MIN_RATIO = 0.5
DEFAULT_PRICE_USD_PER_KWH = 0.10
DEFAULT_CARBON_GCO2E_PER_KWH = 0.0
CLASSES = ("latency-sensitive", "throughput", "background")
# Share of the value of GPU time charged for a slowdown, per class: background work has no
# deadline, so within its slowdown bound its time is free and the cheapest energy wins.
VALUE_OF_TIME_WEIGHT = {"latency-sensitive": 1.0, "throughput": 1.0, "background": 0.0}
JOBS_RELATIONS = ("stg_jobs", "jobs", "raw_jobs")


def slowdown_bound_pct(workload_class: str, settings: RecommendSettings) -> float:
    return {"latency-sensitive": settings.max_slowdown_latency_pct,
            "throughput": settings.max_slowdown_throughput_pct,
            "background": settings.max_slowdown_background_pct}[workload_class]


def _records(cursor) -> list[dict]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def device_limits_w(gpu_model: str, max_seen_limit_w: float | None) -> tuple[float, float, float, str | None]:
    """(default, min, max) W for the model, and a note when they were estimated."""
    if gpu_model in DEVICE_LIMITS_W:
        return (*DEVICE_LIMITS_W[gpu_model], None)
    if max_seen_limit_w is None:
        raise ValueError(f"GPU model {gpu_model!r} has no known limits and no power_limit_w readings")
    return (max_seen_limit_w, UNKNOWN_MIN_RATIO * max_seen_limit_w, max_seen_limit_w,
            f"limits of {gpu_model} unknown: default = highest limit seen, min = {UNKNOWN_MIN_RATIO:.0%} of it")


def _profile(row: dict, feature_set: str) -> WorkloadProfile:
    if feature_set == "dcgm":
        activity, memory = row["sm_active_ratio"], row["dram_ratio"]
    else:
        activity, memory = row["util_gpu_ratio"], row["util_mem_ratio"]
    return WorkloadProfile(activity_ratio=float(activity or 0.0), memory_ratio=float(memory or 0.0),
                           pcie_gbps=float(row["pcie_gbps"] or 0.0), temp_c=float(row["temp_c"] or 60.0))


def recommend_gpu(row: dict, workload_class: str, fit: dict | None, settings: RecommendSettings, *,
                  price_usd_per_kwh: float, carbon_gco2e_per_kwh: float, carbon_price_usd_per_tco2e: float,
                  pue: float) -> dict:
    """One GPU's recommendation row (see fct_recommendation.sql for the columns)."""
    try:
        default_w, min_w, max_w, note = device_limits_w(row["gpu_model"], row["max_power_limit_w"])
    except ValueError as exc:
        # A GPU whose limits nobody knows (an imported log without power.limit) gets no setting,
        # and the row says why rather than failing the whole day.
        return {"host": row["host"], "gpu_uuid": row["gpu_uuid"], "gpu_model": row["gpu_model"],
                "workload_class": workload_class, "power_limit_w": None, "default_limit_w": None,
                "locked_sm_clock_min_mhz": None, "locked_sm_clock_max_mhz": None, "expected_saving_pct": None,
                "expected_energy_saving_kwh_per_day": None, "expected_slowdown_pct": None,
                "reason": f"{exc}: not recommended"}
    out = {"host": row["host"], "gpu_uuid": row["gpu_uuid"], "gpu_model": row["gpu_model"],
           "workload_class": workload_class, "power_limit_w": None, "default_limit_w": default_w,
           "locked_sm_clock_min_mhz": None, "locked_sm_clock_max_mhz": None, "expected_saving_pct": None,
           "expected_energy_saving_kwh_per_day": None, "expected_slowdown_pct": None}
    if row["gpu_uuid"] in settings.do_not_touch or row["host"] in settings.do_not_touch:
        return out | {"reason": "in do_not_touch: left as it is"}
    coef = coefficients_of(fit) if fit else None
    if coef is None:
        return out | {"reason": f"no power model for {row['gpu_model']}: not recommended"}
    if not fit["passed_gate"]:
        return out | {"reason": f"power model of {row['gpu_model']} failed its gate ({fit['gate_reason']}): not recommended"}
    if workload_class == "latency-sensitive":
        return out | {"power_limit_w": default_w, "expected_saving_pct": 0.0, "expected_energy_saving_kwh_per_day": 0.0,
                      "expected_slowdown_pct": 0.0, "reason": "latency-sensitive: keep clocks (default limit)"}
    busy_hours = float(row["busy_hours"] or 0.0)
    profile = _profile(row, fit["feature_set"])
    if busy_hours <= 0 or profile.activity_ratio <= 0:
        return out | {"power_limit_w": default_w, "expected_saving_pct": 0.0, "expected_energy_saving_kwh_per_day": 0.0,
                      "expected_slowdown_pct": 0.0, "reason": "idle all day: nothing for a cap to save"}
    bound = slowdown_bound_pct(workload_class, settings)
    usd_per_kwh = price_usd_per_kwh * pue + carbon_gco2e_per_kwh * pue * carbon_price_usd_per_tco2e / 1e6
    uncapped_w = power_at_clock_w(coef, profile, 1.0)

    time_weight = VALUE_OF_TIME_WEIGHT[workload_class]

    def cost_usd(power_w: float, slowdown_pct: float) -> float:
        energy_kwh = busy_hours * power_w * (1 + slowdown_pct / 100) / 1000
        return (energy_kwh * usd_per_kwh
                + time_weight * settings.value_of_time_usd_per_gpu_hour * busy_hours * slowdown_pct / 100)

    candidates = np.arange(min(default_w, max_w), min_w - 1e-9, -settings.limit_step_w)
    caps = [o for o in (outcome_under_limit(coef, profile, float(lim)) for lim in candidates)
            if o.slowdown_pct <= bound + 1e-9]
    best_cap = min(caps, key=lambda o: (cost_usd(o.power_w, o.slowdown_pct), -o.power_limit_w))
    clock_options = [(s, power_at_clock_w(coef, profile, s), 100 * (time_ratio(profile, s) - 1))
                     for s in np.linspace(1.0, MIN_CLOCK_RATIO, 29)]
    clock_options = [c for c in clock_options if c[2] <= bound + 1e-9]
    s_best, clock_power_w, clock_slowdown = min(clock_options, key=lambda c: (cost_usd(c[1], c[2]), -c[0]))
    measured_peak = float(row["p95_power_w"] or uncapped_w)
    reason_note = f"; {note}" if note else ""
    head = f"{workload_class} ({profile.bottleneck}, busy {busy_hours:.1f} h)"

    def saving(power_w: float, slowdown_pct: float) -> dict:
        ratio = 1 - power_w * (1 + slowdown_pct / 100) / uncapped_w
        return {"expected_slowdown_pct": slowdown_pct, "expected_saving_pct": 100 * ratio,
                "expected_energy_saving_kwh_per_day": busy_hours * uncapped_w * ratio / 1000}

    cap_cost = cost_usd(best_cap.power_w, best_cap.slowdown_pct)
    clock_cost = cost_usd(clock_power_w, clock_slowdown)
    # A cap follows the load (it only bites when power is high), a locked clock does not: prefer a
    # binding cap unless the clock lock is clearly cheaper (the caps are in coarse steps).
    if best_cap.cap_binds and cap_cost <= clock_cost + 0.02 * cost_usd(uncapped_w, 0.0):
        return out | {"power_limit_w": best_cap.power_limit_w, **saving(best_cap.power_w, best_cap.slowdown_pct),
                      "reason": f"{head}: cheapest limit within {bound:g}% slowdown{reason_note}"}
    if s_best < 1.0 and coef.f_max_mhz is not None and clock_cost < cost_usd(uncapped_w, 0.0):
        if measured_peak <= min_w + settings.limit_step_w:
            why = f"draws {measured_peak:.0f} W at p95, never reaching a cap it allows ({min_w:.0f} W minimum): a cap does nothing"
        else:
            why = "a locked clock range saves more than any cap in its limit steps"
        return out | {"power_limit_w": default_w, **saving(clock_power_w, clock_slowdown),
                      "locked_sm_clock_min_mhz": round(MIN_CLOCK_RATIO * coef.f_max_mhz),
                      "locked_sm_clock_max_mhz": round(s_best * coef.f_max_mhz),
                      "reason": f"{head}: {why}; lock SM clocks at or below {s_best * coef.f_max_mhz:.0f} MHz{reason_note}"}
    return out | {"power_limit_w": default_w, **saving(uncapped_w, 0.0),
                  "reason": f"{head}: no cap or clock within {bound:g}% slowdown pays (time costs more than the energy "
                            f"it saves){reason_note}"}


def recommend_day(con: duckdb.DuckDBPyConnection, day: dt.date, settings: RecommendSettings, *,
                  price_usd_per_kwh: float | None = None, carbon_gco2e_per_kwh: float | None = None,
                  carbon_price_usd_per_tco2e: float = 0.0, pue: float = 1.3,
                  samples_relation: str = "stg_gpu_samples") -> int:
    """Write `day`'s rows of fct_recommendation (delete-then-insert); returns the rows written.

    price defaults to DEFAULT_PRICE_USD_PER_KWH, grid intensity to 0 (carbon then costs nothing)."""
    price = DEFAULT_PRICE_USD_PER_KWH if price_usd_per_kwh is None else price_usd_per_kwh
    intensity = DEFAULT_CARBON_GCO2E_PER_KWH if carbon_gco2e_per_kwh is None else carbon_gco2e_per_kwh
    quoted = quoted_relation(samples_relation)
    if not relation_exists(con, samples_relation):
        raise ValueError(f"samples relation {samples_relation!r} does not exist in the warehouse")
    con.execute(f"CREATE OR REPLACE TEMP VIEW reco_input_samples AS SELECT * FROM {quoted}")
    profiles = _records(con.execute(load_sql("recommend_gpu_profile"), {"day": day}))
    classes: dict[str, str] = {}
    jobs = next((name for name in JOBS_RELATIONS if relation_exists(con, name)), None)
    if jobs is not None:
        con.execute(f"CREATE OR REPLACE TEMP VIEW reco_input_jobs AS SELECT * FROM {quoted_relation(jobs)}")
        classes = {r["gpu_uuid"]: r["workload_class"]
                   for r in _records(con.execute(load_sql("recommend_gpu_workload_class"), {"day": day}))}
    fits = {m: load_fit(con, m, day) for m in {p["gpu_model"] for p in profiles}}
    rows = []
    for p in profiles:
        workload_class = classes.get(p["gpu_uuid"]) or ("throughput" if (p["busy_ratio"] or 0) >= 0.5 else "background")
        if workload_class not in CLASSES:
            raise ValueError(f"GPU {p['gpu_uuid']}: workload_class {workload_class!r} is not one of {CLASSES}")
        rows.append({"day": day} | recommend_gpu(p, workload_class, fits[p["gpu_model"]], settings,
                                                 price_usd_per_kwh=price, carbon_gco2e_per_kwh=intensity,
                                                 carbon_price_usd_per_tco2e=carbon_price_usd_per_tco2e, pue=pue))
    con.execute(load_sql("fct_recommendation"))
    con.execute("BEGIN TRANSACTION")
    try:
        con.execute("DELETE FROM fct_recommendation WHERE day = ?", [day])
        for r in rows:
            names = list(r)
            con.execute(f"INSERT INTO fct_recommendation ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                        [float(v) if isinstance(v, np.floating) else v for v in r.values()])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
    return len(rows)
