"""A GPU's power limits (default, min, max W): the device's own, else the catalogue's and the GPU's
own default across days.

What the device reports of itself (NVML's default limit and limit constraints, which the NVML
collector writes beside each reading and fct_gpu_coverage_daily keeps per GPU-day) is the truth
wherever it was reported, capped or not; the rules below fill only what it did not report.

The default is where "keep the default", a rollback and every saving are counted from. A known
model takes the catalogue's (models/gpu_catalogue.csv) unless the GPU's own default is higher (an
A100-SXM4-80GB on a 500 W HGX board has the 400 W board's NVML name); a model the catalogue does
not know takes the highest limit seen. Once the agent caps a GPU, its readings show only the cap,
so its default is taken from before the cap, per GPU, from the first of (limit_seen_w):
  1. the agent's audit: power_limit_w_before of the GPU's first 'apply' (raw_agent_audit), the
     limit it held before joulehouse ever set it;
  2. the GPU's own highest default in earlier days' recommendations (fct_recommendation);
  3. for a model the catalogue does not know, the highest default of the model's GPUs there.
Never the model's figure for a known model: a fleet mixes 400 W and 500 W boards of one NVML name,
and a model-wide 500 W would exceed a 400 W board's maximum.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import duckdb

from joulehouse.models import gpu_catalogue
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import relation_exists

# Unknown model: the highest limit seen is the default, half of it the minimum (NVML minimums are
# 25-50% of the default on the catalogue's models); the reason says so.
UNKNOWN_MIN_RATIO = 0.5
# Where a default limit comes from, as the reason's note says it: "<source> a 500 W limit".
FROM_READINGS = "its readings show"
FROM_AUDIT = "the agent's audit shows that before its first setting it held"
FROM_GPU_EARLIER = "on earlier days it held"
FROM_MODEL_EARLIER = "on earlier days its model's GPUs held"
FROM_DEVICE = "limits as the device reports them (NVML)"
# The profile's columns (recommend_gpu_profile.sql) holding the device's own (default, min, max) W.
REPORTED_LIMIT_COLUMNS = ("power_limit_default_w", "power_limit_min_w", "power_limit_max_w")


@cache  # asked once per GPU of the day; the catalogue's pattern match is the same every time
def catalogue_limits_w(gpu_model: str | None) -> tuple[float, float, float] | None:
    """NVML power limits (default, min, max W) of a model the catalogue (models/gpu_catalogue.csv,
    its NVML names matched as gpu_catalogue.find matches them) gives a minimum for; None otherwise.
    A second table here named six models; the catalogue's L4 minimum (40 W) went unread and caps
    fell to the guessed 36 W, which the agent's device check refuses."""
    spec = gpu_catalogue.find(gpu_model)
    if spec is None or spec.min_limit_w is None:
        return None
    return spec.tdp_w, spec.min_limit_w, spec.max_limit_w or spec.tdp_w


DEVICE_LIMITS_W = {s.gpu_model: limits for s in gpu_catalogue.catalogue()
                   if (limits := catalogue_limits_w(s.gpu_model)) is not None}


def reported_limits_w(row: Mapping) -> tuple[float | None, float | None, float | None]:
    """The (default, min, max) W the device reported of itself in a GPU's profile row, each None
    where it reported none (NULL; a value not above 0 W or not finite is no report either)."""
    return tuple(float(w) if w is not None and math.isfinite(w) and w > 0 else None
                 for w in (row.get(c) for c in REPORTED_LIMIT_COLUMNS))


def device_limits_w(gpu_model: str, max_seen_limit_w: float | None, limit_source: str = FROM_READINGS,
                    reported_w: tuple[float | None, float | None, float | None] = (None, None, None),
                    ) -> tuple[float, float, float, str | None]:
    """(default, min, max) W of the GPU, and a note where they are not the catalogue's.
    `reported_w` (reported_limits_w) is what the device reported: each figure it gives stands,
    whatever the GPU's readings or the catalogue say (after a cap its readings show only the cap;
    an unknown model's minimum is no longer guessed); the rest come from the rules below, its
    reported default standing in for the highest limit held. Raises ValueError where the figures
    cannot all be known, or where the device's minimum lies above its own default or maximum."""
    default_r, min_r, max_r = reported_w
    if default_r is None and min_r is None and max_r is None:
        return _limits_by_rule_w(gpu_model, max_seen_limit_w, limit_source)
    name = repr(gpu_model) if gpu_model else "(not reported)"
    above = [f"{label} {w:.0f} W" for label, w in (("default", default_r), ("maximum", max_r))
             if w is not None and min_r is not None and min_r > w]
    if above:
        raise ValueError(f"GPU model {name}: the device reports a {min_r:.0f} W minimum limit above its "
                         f"{' and '.join(above)}")
    if default_r is None:
        by_rule = _limits_by_rule_w(gpu_model, max_seen_limit_w, limit_source)
    else:
        by_rule = _limits_by_rule_w(gpu_model, default_r, FROM_DEVICE)
    limits = tuple(r if r is not None else w for r, w in zip(reported_w, by_rule[:3]))
    if limits == by_rule[:3] and by_rule[3] is None:
        return (*limits, None)  # the catalogue's own figures: nothing to say
    said = ", ".join(f"{label} {w:.0f} W" for label, w in zip(("default", "min", "max"), reported_w) if w is not None)
    note = f"{FROM_DEVICE}: {said}"
    if None in reported_w and by_rule[3] is not None:
        note += f"; the rest: {by_rule[3]}"
    return (*limits, note)


def _limits_by_rule_w(gpu_model: str, max_seen_limit_w: float | None,
                      limit_source: str = FROM_READINGS) -> tuple[float, float, float, str | None]:
    """(default, min, max) W for the model, and a note when they were estimated. A known model
    whose GPU held a limit above its catalogue default (an A100-SXM4-80GB on a 500 W HGX board
    has the 400 W board's NVML name) takes that limit as its default: at 400 W its "keep the
    default" was a cap slowing it 6.7%, and its savings were counted from the wrong run.
    `max_seen_limit_w` is the highest limit the GPU held a while (recommend_gpu_profile.sql's
    max_power_limit_w, not its highest reading: one stray reading is not a board built for more),
    or its default from before a cap (limit_seen_w); `limit_source` says which, in the note."""
    known = catalogue_limits_w(gpu_model)
    if known is not None:
        default_w, min_w, max_w = known
        if max_seen_limit_w is not None and max_seen_limit_w > default_w:
            return (max_seen_limit_w, min_w, max(max_w, max_seen_limit_w),
                    f"GPU model {gpu_model}: {limit_source} a {max_seen_limit_w:.0f} W limit, above the "
                    f"catalogue's {default_w:.0f} W default (a board built for more): default {max_seen_limit_w:.0f} W")
        return (*known, None)
    # An imported log may not name its GPU: say so rather than print Python's None.
    name = repr(gpu_model) if gpu_model else "(not reported)"
    if max_seen_limit_w is None or not max_seen_limit_w > 0:
        # a 0 W limit reads as "no limit known" in the warehouse: as the default it made a 0 W
        # setting, which the signed config refuses, and no GPU of the fleet got its config that day
        raise ValueError(f"GPU model {name} has no known limits and no positive power_limit_w readings")
    return (max_seen_limit_w, UNKNOWN_MIN_RATIO * max_seen_limit_w, max_seen_limit_w,
            f"limits of GPU model {name} unknown: {limit_source} a {max_seen_limit_w:.0f} W limit: default "
            f"{max_seen_limit_w:.0f} W, min = {UNKNOWN_MIN_RATIO:.0%} of it")


def stray_limit_note(row: dict) -> str | None:
    """What the GPU's profile set aside as stray limit readings (recommend_gpu_profile.sql: a limit
    read too rarely to be the GPU's, a corrupt or mistyped reading), or None where none was."""
    stray_w = row.get("stray_max_power_limit_w")
    if stray_w is None or stray_w <= row["max_power_limit_w"]:
        return None  # none, or below the default an earlier day found
    return (f"{row['n_stray_power_limit_readings']} of its {row['n_samples']} readings showed a limit above "
            f"{row['max_power_limit_w']:.0f} W (up to {stray_w:.0f} W), too few to be its limit: set aside")


@dataclass(frozen=True)
class EarlierDefaults:
    """Default limits (W) known from before a day, by source (the module docstring's order)."""

    audited_w: dict[str, float]  # per gpu_uuid: the limit before the agent's first apply
    gpu_w: dict[str, float]  # per gpu_uuid: the highest default its earlier recommendations used
    model_w: dict[str, float]  # per gpu_model: the same over the model's GPUs


def earlier_default_limits_w(con: duckdb.DuckDBPyConnection, day: dt.date) -> EarlierDefaults:
    """What the agent's audit (up to `day`) and earlier days' recommendations (before `day`) say
    of each GPU's default; empty where the warehouse has neither."""
    audited_w: dict[str, float] = {}
    if relation_exists(con, "raw_agent_audit"):
        # a first apply whose limit before went unread says nothing: the later ones' are the agent's caps
        audited_w = {uuid: float(w) for uuid, w in con.execute(load_sql("recommend_audited_defaults"), {"day": day}).fetchall()
                     if w is not None and w > 0}
    gpu_w: dict[str, float] = {}
    model_w: dict[str, float] = {}
    if relation_exists(con, "fct_recommendation"):
        for uuid, model, w in con.execute(load_sql("recommend_earlier_defaults"), {"day": day}).fetchall():
            gpu_w[uuid] = max(gpu_w.get(uuid, 0.0), float(w))
            if model is not None:
                model_w[model] = max(model_w.get(model, 0.0), float(w))
    return EarlierDefaults(audited_w=audited_w, gpu_w=gpu_w, model_w=model_w)


def limit_seen_w(gpu_uuid: str, gpu_model: str | None, seen_w: float | None,
                 earlier: EarlierDefaults) -> tuple[float | None, str]:
    """The highest limit (W) to take device_limits_w's default from, and its `limit_source`: the
    day's (`seen_w`), or where the GPU held more before a cap, that (module docstring), since its
    readings then show only the cap and the default would follow the caps down."""
    for source, known_w in ((FROM_AUDIT, earlier.audited_w.get(gpu_uuid)), (FROM_GPU_EARLIER, earlier.gpu_w.get(gpu_uuid)),
                            (FROM_MODEL_EARLIER, None if catalogue_limits_w(gpu_model) is not None
                             else earlier.model_w.get(gpu_model))):
        if known_w is None:
            continue
        if seen_w is not None and seen_w >= known_w:
            break
        seen = f"this day's readings show {seen_w:.0f} W at most" if seen_w is not None else "no limit was read this day"
        return known_w, f"{seen}, but {source}"
    return seen_w, FROM_READINGS
