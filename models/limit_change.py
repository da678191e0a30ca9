"""A GPU's power-limit change, read from its days of readings: the days before at the old limit
and the days after at the new one (pure: the day panel in, the changes out).

models.outcome measures what each change saved; models.outcome_matched holds its matched-jobs
estimator. Both take the changes from here, so neither imports the other.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

# Days before a change that stand for "before" (at most), and days after it that are measured.
LOOKBACK_DAYS = 7
MAX_AFTER_DAYS = 14


@dataclass(frozen=True)
class Change:
    """A GPU's power limit change: `before_days` at `limit_before_w`, then `after_days` at `limit_after_w`."""

    gpu_uuid: str
    host: str
    gpu_model: str
    effective_day: dt.date
    limit_before_w: float
    limit_after_w: float
    before_days: tuple[dt.date, ...]
    after_days: tuple[dt.date, ...]


def find_changes(panel: dict[str, list[dict]], day: dt.date, *, lookback_days: int = LOOKBACK_DAYS,
                 max_after_days: int = MAX_AFTER_DAYS) -> list[Change]:
    """The latest limit change of each GPU whose new limit took effect within `max_after_days`
    up to `day`. Transition days (two limits read) belong to neither side."""
    changes = []
    for uuid, rows in panel.items():
        clean = [r for r in rows if r["n_power_limits"] == 1 and r["power_limit_w"] is not None]
        if len(clean) < 2:
            continue
        last = clean[-1]["power_limit_w"]
        after = [r for r in reversed(clean) if r["power_limit_w"] == last]
        after_days = []
        for r in reversed(clean):
            if r["power_limit_w"] != last:
                break
            after_days.append(r["day"])
        idx = len(clean) - len(after_days)
        if idx == 0:
            continue  # no change in the window
        before_limit = clean[idx - 1]["power_limit_w"]
        effective = min(after_days)
        if (day - effective).days >= max_after_days:
            continue
        before_days = []
        for r in reversed(clean[:idx]):
            if r["power_limit_w"] != before_limit or (effective - r["day"]).days > lookback_days:
                break
            before_days.append(r["day"])
        changes.append(Change(uuid, after[0]["host"], after[0]["gpu_model"], effective, float(before_limit),
                              float(last), tuple(sorted(before_days)), tuple(sorted(after_days))))
    return changes
