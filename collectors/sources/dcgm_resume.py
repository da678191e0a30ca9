"""Where the DCGM source goes on when its watermark file is lost, or older than the lake: from the
newest range the lake holds for it (collectors/sources/dcgm.py).

A range's rows land in files named by the range (`part-<start us>-<tag>-<end us>.parquet`, one
per date and host partition). Without this, a removed state file re-read the initial lookback, and
an older backup its own past, under other names than the files already there: every reading of
those ranges twice in the lake (16 rows after two syncs; a removed state file and one more sync:
27 rows for 17 readings), and after a long stop the readings between the lake's last range and
the lookback never.

The newest range found is redone as if a crash had left it pending (its files are replaced, a
partition a crash left unwritten is written), its floor the end of the range before it. Only
the newest date folders are listed, back to the day before the state's own mark, MAX_DAYS_SCANNED
at most: a start never walks a year of lake.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from joulehouse.collectors.sources.dcgm_state import STATE_VERSION, epoch_s, iso_utc
from joulehouse.collectors.writer import partition_files

log = logging.getLogger(__name__)

# More than Prometheus' default retention (15 d): a range older than that cannot be read again anyway.
MAX_DAYS_SCANNED = 16


def range_file_name(start_s: float, tag: str, end_s: float) -> str:
    """The lake file name of the range [start_s, end_s] (epoch seconds) written by source `tag`."""
    return f"part-{int(start_s * 1e6):016d}-{tag}-{int(end_s * 1e6):016d}.parquet"


def newest_ranges(lake: Path, dataset: str, tag: str, since_date: str = "") -> list[tuple[float, float]]:
    """The two newest (start_s, end_s) ranges whose files `tag` wrote under `lake`/`dataset`, newest
    first, from the newest MAX_DAYS_SCANNED date folders not before `since_date` (YYYY-MM-DD)."""
    name = re.compile(rf"part-(\d{{16}})-{re.escape(tag)}-(\d{{16}})\.parquet")
    folder = lake / dataset
    days = sorted((d.name.removeprefix("date=") for d in folder.glob("date=*") if d.is_dir()), reverse=True)
    found: set[tuple[float, float]] = set()
    for day in [d for d in days if d >= since_date][:MAX_DAYS_SCANNED]:
        for host in (h.name.removeprefix("host=") for h in (folder / f"date={day}").glob("host=*")):
            try:
                paths = partition_files(lake, dataset, day, host)
            except ValueError:  # a folder no writer made ('host=' and a name no host has): none of our ranges
                continue
            for path in paths:
                if match := name.fullmatch(Path(path).name):
                    found.add((int(match[1]) / 1e6, int(match[2]) / 1e6))
        # a range's files lie in the days of its rows: none in an older folder ends later
        if len({end for _, end in found}) >= 2:
            break
    return sorted(found, key=lambda r: r[1], reverse=True)[:2]


def resumed_state(state: dict[str, Any], lake: Path, dataset: str, tag: str, step_s: int) -> dict[str, Any] | None:
    """The state to go on from when the lake holds a range ending after what `state` says was
    written or pending; None when `state` is as new as the lake."""
    pending = state.get("pending")
    mark = pending["end_at"] if pending else state.get("watermark_at")
    since = ""
    if mark:
        since = (datetime.fromisoformat(mark).astimezone(timezone.utc) - timedelta(days=1)).date().isoformat()
    ranges = newest_ranges(lake, dataset, tag, since)
    if not ranges or (mark and ranges[0][1] <= epoch_s(mark)):
        return None
    (start, end), before = ranges[0], ranges[1:]
    # The range before's end was this one's floor; with none found, the start less a step (ranges
    # start one step after the watermark). Never lower than two steps before the start: a gap of
    # ranges with no rows would otherwise open one raw query of days.
    floor = max(before[0][1], start - 2 * step_s) if before else start - step_s
    log.warning("%s: the state file %s than the lake, which holds %s..%s; redoing that range and going on "
                "from it", tag, f"says {mark}, older" if mark else "is missing or empty, and so older",
                iso_utc(start), iso_utc(end))
    return {"state_version": STATE_VERSION, "watermark_at": iso_utc(floor),
            "pending": {"start_at": iso_utc(start), "end_at": iso_utc(end)}}
