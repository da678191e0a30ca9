"""The recommender's controls: a share of each GPU model's changed GPUs, and one GPU of each
multi-GPU job, left at the default so the next day's outcome (models.outcome) measures the saving
against GPUs that did the same work untouched."""

from __future__ import annotations

import hashlib
import math


def _stable_order(uuid: str) -> str:
    return hashlib.sha256(uuid.encode()).hexdigest()


def hold_out_controls(rows: list[dict], share: float, job_groups: list[list[str]] = ()) -> list[dict]:
    """Leave `share` of each GPU model's changed GPUs (a stable choice: lowest sha256 of the UUID)
    at the default as controls, at least one changed GPU kept; their rows say what they would get.

    Then every multi-GPU job group of the day (`job_groups`: the GPUs that ran one job) with at
    least two GPUs that would get a setting keeps one of them as a control too (the stable
    choice again), unless it already holds one: the outcome compares GPUs that ran the same job,
    so a treated GPU needs an untouched neighbour doing the same work."""
    if not 0 <= share < 1:
        raise ValueError(f"holdout_share={share}: expected 0 <= share < 1")
    changed = [r for r in rows if r["default_limit_w"] is not None and r["power_limit_w"] is not None
               and (r["power_limit_w"] < r["default_limit_w"] or r["locked_sm_clock_max_mhz"] is not None)]
    held: set[str] = set()
    for model in {r["gpu_model"] for r in changed}:
        mine = sorted((r["gpu_uuid"] for r in changed if r["gpu_model"] == model), key=_stable_order)
        held |= set(mine[:min(math.ceil(share * len(mine)), len(mine) - 1)])
    if share > 0:
        changed_ids = {r["gpu_uuid"] for r in changed}
        for group in sorted(job_groups, key=lambda g: sorted(g)):
            would_change = sorted((u for u in set(group) if u in changed_ids), key=_stable_order)
            if len(would_change) >= 2 and not held & set(would_change):
                held.add(would_change[0])
    out = []
    for r in rows:
        if r["gpu_uuid"] not in held:
            out.append(r)
            continue
        would = f"{r['power_limit_w']:.0f} W" + (f", SM clocks <= {r['locked_sm_clock_max_mhz']:.0f} MHz"
                                                 if r["locked_sm_clock_max_mhz"] is not None else "")
        out.append(r | {"power_limit_w": r["default_limit_w"], "locked_sm_clock_min_mhz": None,
                        "locked_sm_clock_max_mhz": None, "expected_saving_pct": 0.0, "expected_slowdown_pct": 0.0,
                        "expected_energy_saving_kwh_per_day": 0.0,
                        "reason": f"held out as a control ({share:.0%} of the {r['gpu_model']} GPUs given a setting "
                                  f"and one per multi-GPU job keep the default, so the saving can be measured against them); "
                                  f"would set {would} "
                                  f"for {r['expected_saving_pct']:.1f}% less energy per unit of work"})
    return out
