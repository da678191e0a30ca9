"""Where the work should run: consolidation and thermal placement (fct_recommendation_extra).

Consolidation (task aggregation): on each host, the GPUs that sat mostly idle (mean activity
under `max_mean_activity` over the day) carry light work that could share fewer GPUs. Their
per-minute activities (models/sql/placement_activity_minutely.sql: each reading stands for the
time to its stream's next one, as far as the day's energy bridged it) are summed over the minutes
every one of them was read; the work fits on ceil(p99 of that sum / `target_activity`) GPUs. The
others are freed, least busy first. The minutes a GPU was not read, or read without its activity,
say nothing of its work: read as idle they made a GPU read for 2 h look light, packed, and parked
with 24 h of idle draw saved, and four GPUs read every 5 minutes at staggered instants sum one
GPU's work a minute (packed onto a quarter of the GPUs the work needs). So only GPUs whose
readings cover at least `MIN_COVERED_DAY_RATIO` of the day are packed, and only on a host whose
light GPUs were all read in that share of its minutes. Moving work keeps its busy energy (it runs
elsewhere), so the saving is only the idle power of the freed GPU, and only if something parks
it: with `[placement] parking = "power-off"` (the scheduler drains it, from the placement-advice
file, and the node powers it down) a freed GPU saves idle_power_w x 24 h; with "none" it would
idle on at the same draw, so the row says so and counts 0. The latency risk is what packing costs
the work: the share of those minutes in which the packed work would need more than the kept
GPUs at 100% (it would queue), with 'low' (never, and its p99 within the target), 'medium' (under
1% of minutes) or 'high'.

Thermal placement: chip temperature ~ inlet + theta x P (theta per GPU from fct_thermal_gpu),
and leakage power rises by temp_w_per_c (the fitted power model's, else DEFAULT_TEMP_W_PER_C)
per degree. Within a host and GPU model, giving the day's hottest work (busy power x busy hours)
to the lowest-theta GPUs minimises sum(theta x heat) (rearrangement inequality). A GPU's saving
is temp_w_per_c x theta x (its heat now - the heat it would get) / 1000, in kWh/day; they add up
to the host's saving, which is never negative.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections import defaultdict

import duckdb
import numpy as np

from joulehouse.models.activity import ACTIVITY_VIEW, create_activity_view
from joulehouse.models.power import load_fit
from joulehouse.models.recommend_inputs import create_covered_hours_inputs
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.sqlio import records, relation_exists, replace_day_rows

log = logging.getLogger(__name__)

MAX_MEAN_ACTIVITY = 0.3
TARGET_ACTIVITY = 0.8
# W of leakage per C near operating temperature (A100/H100 static ~50-70 W rising ~10%/10 C).
DEFAULT_TEMP_W_PER_C = 0.5
HOURS_PER_DAY = 24.0
MINUTES_PER_DAY = 1440
# The share of the day a GPU's readings must cover to be packed, and of a host's minutes its light
# GPUs must all be read in (the 90% the recommender asks of an hour whose server overhead it measures).
MIN_COVERED_DAY_RATIO = 0.9
PARKING = ("power-off", "none")
# What tells how long each reading stands for (placement_activity_minutely.sql).
SPAN_COLUMNS = ("interval_s", "energy_mj_total")


def latency_risk(total: np.ndarray, needed: int, target_activity: float) -> tuple[str, float]:
    """('low' | 'medium' | 'high', share of minutes the packed work exceeds `needed` GPUs at 100%)."""
    saturated = float(np.mean(total > needed + 1e-9)) if total.size else 0.0
    if saturated == 0.0 and float(np.quantile(total, 0.99)) <= needed * target_activity + 1e-9:
        return "low", saturated
    return ("medium" if saturated < 0.01 else "high"), saturated


def light_gpus_by_host(gpus: list[dict], max_mean_activity: float = MAX_MEAN_ACTIVITY) -> dict[str, list[dict]]:
    """The GPUs consolidation may pack, per host with at least two: read for most of the day
    (MIN_COVERED_DAY_RATIO) at a mean activity under `max_mean_activity`."""
    by_host: dict[str, list[dict]] = defaultdict(list)
    for g in gpus:
        covered = g["covered_hours"] is not None and g["covered_hours"] >= MIN_COVERED_DAY_RATIO * HOURS_PER_DAY - 1e-9
        if covered and g["mean_activity_ratio"] is not None and g["mean_activity_ratio"] < max_mean_activity:
            by_host[g["host"]].append(g)
    return {host: light for host, light in sorted(by_host.items()) if len(light) >= 2}


def consolidation(gpus: list[dict], minutes: list[dict], *, max_mean_activity: float = MAX_MEAN_ACTIVITY,
                  target_activity: float = TARGET_ACTIVITY, parking: str = "power-off") -> list[dict]:
    """Rows (host, gpu_uuid, detail, expected_saving_kwh_per_day, latency_risk, saturated_minutes_ratio)
    for GPUs to free on each host (`parking`: see the module doc). `minutes`: placement_activity_minutely's
    rows; a minute a GPU has no row for, or a NULL activity, is unknown."""
    if parking not in PARKING:
        raise ValueError(f"parking={parking!r}: expected one of {PARKING}")
    out = []
    activity: dict[str, dict] = defaultdict(dict)
    for m in minutes:
        if m["activity_ratio"] is not None:
            activity[m["gpu_uuid"]][m["minute_at"]] = m["activity_ratio"]
    for host, light in light_gpus_by_host(gpus, max_mean_activity).items():
        # in a minute one of them was not read, its work is unknown: summed as idle, the sum fell
        # short of the work to pack
        stamps = sorted(set.intersection(*(set(activity[g["gpu_uuid"]]) for g in light)))
        if len(stamps) < MIN_COVERED_DAY_RATIO * MINUTES_PER_DAY:
            log.warning("%s: its %d light GPUs were all read in %d of the day's %d minutes, under %.0f%%: "
                        "not packed, as the minutes one was not read say nothing of its work", host, len(light),
                        len(stamps), MINUTES_PER_DAY, MIN_COVERED_DAY_RATIO * 100)
            continue
        total = np.array([sum(activity[g["gpu_uuid"]][t] for g in light) for t in stamps])
        needed = max(1, math.ceil(float(np.quantile(total, 0.99)) / target_activity - 1e-9))
        if needed >= len(light):
            # all of them at once (a multi-GPU job): nothing can be freed. The slice below went
            # negative and parked all but the last GPUs, with the risk judged for GPUs there are not
            continue
        # one order for both lists: two sorts split ties apart, and a parked GPU was named as the
        # one the work moves to
        ranked = sorted(light, key=lambda g: (-g["mean_activity_ratio"], g["gpu_uuid"]))
        keep = ranked[:needed]
        for g in reversed(ranked[needed:]):
            if g["idle_power_w"] is None:
                continue
            risk, saturated = latency_risk(total, needed, target_activity)
            parked = parking == "power-off"
            saving = (f"saves its {g['idle_power_w']:.0f} W idle draw all day once powered down" if parked else
                      f"counts nothing: nothing parks a freed GPU here ([placement] parking = none), so it would "
                      f"idle on at {g['idle_power_w']:.0f} W")
            out.append({"host": host, "gpu_uuid": g["gpu_uuid"], "latency_risk": risk,
                        "saturated_minutes_ratio": saturated,
                        "expected_saving_kwh_per_day": g["idle_power_w"] * HOURS_PER_DAY / 1000 if parked else 0.0,
                        "detail": f"{len(light)} GPUs on {host} averaged under {max_mean_activity:.0%} activity; "
                                  f"their work peaks (p99) at {np.quantile(total, 0.99):.2f} GPUs of activity over the "
                                  f"{len(stamps)} minutes all {len(light)} were read, which "
                                  f"fits on {needed} at {target_activity:.0%}: move this GPU's "
                                  f"{g['busy_hours']:.1f} busy h to {', '.join(k['gpu_uuid'] for k in keep)} and park it "
                                  f"({saving}); latency risk {risk}: the packed work would queue in "
                                  f"{saturated:.1%} of those minutes"})
    return out


def thermal_placement(gpus: list[dict], theta: dict[str, float], temp_w_per_c: dict[str, float]) -> list[dict]:
    """Rows (host, gpu_uuid, detail, expected_saving_kwh_per_day) for GPUs whose work should change."""
    out = []
    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for g in gpus:
        if g["gpu_uuid"] in theta and g["busy_power_w"] is not None and g["busy_hours"]:
            groups[(g["host"], g["gpu_model"])].append(g)
    for (host, model), members in sorted(groups.items()):
        if len(members) < 2:
            continue
        k = temp_w_per_c.get(model, DEFAULT_TEMP_W_PER_C)
        heat = {g["gpu_uuid"]: g["busy_power_w"] * g["busy_hours"] for g in members}  # W h of work per day
        by_theta = sorted(members, key=lambda g: theta[g["gpu_uuid"]])
        by_heat = sorted(members, key=lambda g: -heat[g["gpu_uuid"]])
        for target, source in zip(by_theta, by_heat):
            u, s = target["gpu_uuid"], source["gpu_uuid"]
            saving_kwh = k * theta[u] * (heat[u] - heat[s]) / 1000  # W/C x C/W x W h -> W h -> kWh
            if u == s or abs(heat[u] - heat[s]) < 1e-9:
                continue
            out.append({"host": host, "gpu_uuid": u, "expected_saving_kwh_per_day": saving_kwh,
                        "detail": f"theta {theta[u]:.3f} C/W ranks {by_theta.index(target) + 1} of {len(members)} "
                                  f"{model} on {host}: give it the work now on {s} ({source['busy_power_w']:.0f} W for "
                                  f"{source['busy_hours']:.1f} h) instead of its own ({target['busy_power_w']:.0f} W for "
                                  f"{target['busy_hours']:.1f} h); leakage {k:.2f} W/C"})
    return out


def light_gpu_minutes(con: duckdb.DuckDBPyConnection, day: dt.date, gpu_uuids: list[str],
                      warehouse: WarehouseSettings) -> list[dict]:
    """placement_activity_minutely's rows of `gpu_uuids` on `day` (over gpu_activity_samples), each
    reading standing for the time the day's energy bridged (`warehouse`: max_gap_s, max_counter_gap_s).
    Raises ValueError where the samples lack the columns that tell that time."""
    present = {row[0] for row in con.execute(f"DESCRIBE {ACTIVITY_VIEW}").fetchall()}
    if missing := [c for c in SPAN_COLUMNS if c not in present]:
        raise ValueError(f"stg_gpu_samples has no {' or '.join(missing)}: the time each reading stands for, which "
                         "the warehouse build gives it (joulehouse warehouse build)")
    return records(con.execute(load_sql("placement_activity_minutely"), {
        "day": day, "gpu_uuids": gpu_uuids, "max_gap_s": float(warehouse.max_gap_s),
        "max_counter_gap_s": float(warehouse.max_counter_gap_s)}))


def recommend_placement(con: duckdb.DuckDBPyConnection, day: dt.date, *, parking: str = "power-off",
                        warehouse: WarehouseSettings | None = None) -> int:
    """Write `day`'s rows of fct_recommendation_extra (delete-then-insert); returns the rows written.
    `warehouse`: the settings the day was built with, so a reading's activity stands for the time
    its energy was bridged (max_gap_s, max_counter_gap_s; None: the defaults).

    Needs stg_gpu_samples for `day`; thermal placement also fct_thermal_gpu (models.thermal). Busy
    hours count no more than the warehouse's energy covered (fct_gpu_coverage_daily, where built)."""
    create_activity_view(con, day)
    create_covered_hours_inputs(con)
    gpus = records(con.execute(load_sql("placement_gpu_day"), {"day": day}))
    light = [g["gpu_uuid"] for host_gpus in light_gpus_by_host(gpus).values() for g in host_gpus]
    minutes = light_gpu_minutes(con, day, light, warehouse or WarehouseSettings()) if light else []
    rows = [r | {"kind": "consolidation"} for r in consolidation(gpus, minutes, parking=parking)]
    if relation_exists(con, "fct_thermal_gpu"):
        # among the GPUs that keep their work: work placed on a GPU consolidation frees is work it
        # will not run, and its saving was counted beside the parking's
        freed = {r["gpu_uuid"] for r in rows}
        gpus = [g for g in gpus if g["gpu_uuid"] not in freed]
        theta = dict(con.execute("SELECT gpu_uuid, theta_c_per_w FROM fct_thermal_gpu WHERE day = ?", [day]).fetchall())
        fits = {m: load_fit(con, m, day) for m in {g["gpu_model"] for g in gpus}}
        k = {m: f["temp_w_per_c"] for m, f in fits.items() if f and f.get("temp_w_per_c") and f["temp_w_per_c"] > 0}
        rows += [r | {"kind": "thermal_placement"} for r in thermal_placement(gpus, theta, k)]
    con.execute(load_sql("fct_recommendation_extra"))
    con.execute(load_sql("fct_recommendation_extra_columns"))
    columns = ["day", "kind", "host", "gpu_uuid", "detail", "expected_saving_kwh_per_day", "latency_risk",
               "saturated_minutes_ratio"]
    replace_day_rows(con, day, {"fct_recommendation_extra": (columns, [
        [day, r["kind"], r["host"], r["gpu_uuid"], r["detail"], float(r["expected_saving_kwh_per_day"]),
         r.get("latency_risk"), r.get("saturated_minutes_ratio")] for r in rows])})
    return len(rows)
