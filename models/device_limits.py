"""A GPU's power limits (default, min, max W): the catalogue's (models/gpu_catalogue.csv), and for
a model it does not know, the highest limit seen, also on earlier days (after a cap, its readings
show only the cap)."""

from __future__ import annotations

import datetime as dt
from functools import cache

import duckdb

from joulehouse.models import gpu_catalogue
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import relation_exists


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
# Unknown model: the highest limit seen is the default, half of it the minimum (NVML minimums are
# 25-50% of the default on the catalogue's models); the reason says so.
UNKNOWN_MIN_RATIO = 0.5


def device_limits_w(gpu_model: str, max_seen_limit_w: float | None) -> tuple[float, float, float, str | None]:
    """(default, min, max) W for the model, and a note when they were estimated. A known model
    whose readings show a limit above its catalogue default (an A100-SXM4-80GB on a 500 W HGX board
    has the 400 W board's NVML name) takes that limit as its default: at 400 W its "keep the
    default" was a cap slowing it 6.7%, and its savings were counted from the wrong run.
    `max_seen_limit_w` is the highest limit the GPU held a while (recommend_gpu_profile.sql's
    max_power_limit_w), not its highest reading: one stray reading is not a board built for more."""
    known = catalogue_limits_w(gpu_model)
    if known is not None:
        default_w, min_w, max_w = known
        if max_seen_limit_w is not None and max_seen_limit_w > default_w:
            return (max_seen_limit_w, min_w, max(max_w, max_seen_limit_w),
                    f"GPU model {gpu_model}: its readings show a {max_seen_limit_w:.0f} W limit, above the "
                    f"catalogue's {default_w:.0f} W default (a board built for more): default {max_seen_limit_w:.0f} W")
        return (*known, None)
    # An imported log may not name its GPU: say so rather than print Python's None.
    name = repr(gpu_model) if gpu_model else "(not reported)"
    if max_seen_limit_w is None or not max_seen_limit_w > 0:
        # a 0 W limit reads as "no limit known" in the warehouse: as the default it made a 0 W
        # setting, which the signed config refuses, and no GPU of the fleet got its config that day
        raise ValueError(f"GPU model {name} has no known limits and no positive power_limit_w readings")
    return (max_seen_limit_w, UNKNOWN_MIN_RATIO * max_seen_limit_w, max_seen_limit_w,
            f"limits of GPU model {name} unknown: default = highest limit seen (this day or in earlier days' "
            f"recommendations), min = {UNKNOWN_MIN_RATIO:.0%} of it")


def stray_limit_note(row: dict) -> str | None:
    """What the GPU's profile set aside as stray limit readings (recommend_gpu_profile.sql: a limit
    read too rarely to be the GPU's, a corrupt or mistyped reading), or None where none was."""
    stray_w = row.get("stray_max_power_limit_w")
    if stray_w is None or stray_w <= row["max_power_limit_w"]:
        return None  # none, or below the default an earlier day found (a model of unknown limits)
    return (f"{row['n_stray_power_limit_readings']} of its {row['n_samples']} readings showed a limit above "
            f"{row['max_power_limit_w']:.0f} W (up to {stray_w:.0f} W), too few to be its limit: set aside")


def earlier_default_limits_w(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, float]:
    """Per GPU model, the highest default limit (W) earlier days' recommendations used; {} before any."""
    if not relation_exists(con, "fct_recommendation"):
        return {}
    return dict(con.execute(load_sql("recommend_earlier_defaults"), {"day": day}).fetchall())


def limit_seen_w(gpu_model: str | None, seen_w: float | None, earlier: dict[str, float]) -> float | None:
    """The highest limit (W) to take device_limits_w's default from: for a model of unknown limits
    also the default an earlier day found (after a cap, its readings show only the cap, and the
    default and floor would follow the caps down)."""
    if catalogue_limits_w(gpu_model) is not None or earlier.get(gpu_model) is None:
        return seen_w
    return max(w for w in (seen_w, earlier[gpu_model]) if w is not None)
