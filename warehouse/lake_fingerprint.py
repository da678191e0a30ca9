"""What a day's build read from the lake, and whether the lake still holds just that.

The daily build of day D reads D's date= folder and, for the readings that bridge midnight, the
neighbouring days' files whose readings reach into D's margin. A node that ships after D was built,
or the next day's first files arriving after it (they bridge D's last minutes), change what a build
of D would read: D's facts are then stale, not wrong. So the build records, per dataset and date=
folder, what it read (fct_warehouse_build_lake_files), and the gate lists the lake again and
compares (`lake_changes`): a folder that differs is a reason to re-run that day.

What is compared must survive a compaction, which rewrites a host's files of a day into one with
the same rows (warehouse/lake_compact.py; the DAG compacts day D+1 after D was built, and a
comparison of files, paths, sizes and times called every day stale): the readings of D's own
folder, from the files' footers, and, of a neighbouring folder, which hosts have files reaching
into D. Files and bytes are kept beside them to say what changed. Not seen: a file replaced by
one with as many readings, and a host that already had files reaching into D shipping more of
them (its first minutes after a late start).

Cost: a listing and a stat per file (read_blob without its content opens no file), and the footers
of the files read, which the build opens anyway (the lake contract's check); the gate reads the
same again for each built day it checks. A footer that cannot be read is found by halving the
list, not one query per file.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

import duckdb

from joulehouse.collectors.schema import DATASETS, TIME_COLUMN
from joulehouse.warehouse.lake_contract import build_dates, day_files
from joulehouse.warehouse.sqlio import SqlFiles, relation_exists

BUILD_SQL = SqlFiles("joulehouse.warehouse", "build_sql")
# The temp table fct_warehouse_build_lake_files.sql reads: the fingerprint taken when the build
# listed the lake, before it read a row (a file changed while it read is then seen as changed).
FINGERPRINT_TABLE = "jh_build_lake_fingerprint"
RELATION = "fct_warehouse_build_lake_files"
COMPARED = ("n_rows", "hosts")


@dataclass(frozen=True)
class FolderChange:
    """One date= folder of one dataset whose files differ from those the build read."""

    dataset: str
    partition_date: dt.date
    built: dict
    now: dict


def build_window(day: dt.date, margin_s: float) -> tuple[dt.datetime, dt.datetime]:
    """[start, end] of the readings a build of `day` reads (UTC): the day and `margin_s` either side."""
    midnight = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    margin = dt.timedelta(seconds=margin_s)
    return midnight - margin, midnight + dt.timedelta(days=1) + margin


def files_read(con: duckdb.DuckDBPyConnection, day: dt.date, listed: Mapping[str, list[str]],
               window: tuple[dt.datetime, dt.datetime]) -> tuple[list[str], dict[str, int | None]]:
    """(of `listed` (dataset -> files of the day's and its neighbours' date= folders), those a build
    of `day` takes readings from: all of the day's own, and each neighbour's whose footer's time
    range reaches into `window` (or says nothing of it); {file: its rows, None where its footer
    cannot be read}). The next day's folder grows all day; its files of later hours change nothing
    of `day`."""
    own_folder = f"/date={day.isoformat()}/"
    every = [f for files in listed.values() for f in files]
    start, end = window
    footers = _footers(con, every)
    read = sorted(f for f in every if own_folder in f or _reaches(footers[f], start, end))
    return read, {f: footers[f][2] for f in read}


def _reaches(footer: tuple, start: dt.datetime, end: dt.datetime) -> bool:
    first, last, _ = footer
    return first is None or last is None or (first <= end and last >= start)


def _footers(con: duckdb.DuckDBPyConnection, files: list[str]) -> dict[str, tuple]:
    """{file: (first_at, last_at, n_rows)} from the footers; (None, None, None) for a file whose
    footer cannot be read (a truncated file that came after the build), found by halving the list:
    one such file among thousands cost a query per file."""
    if not files:
        return {}
    try:
        rows = BUILD_SQL.execute(con, "file_time_ranges", {"time_columns": TIME_COLUMN, "files": files}).fetchall()
    except duckdb.Error:
        if len(files) == 1:
            return {files[0]: (None, None, None)}
        half = len(files) // 2
        return {**_footers(con, files[:half]), **_footers(con, files[half:])}
    return {f: (first, last, n_rows) for f, first, last, n_rows in rows}


def _fingerprint_params(con: duckdb.DuckDBPyConnection, day: dt.date, listed: Mapping[str, list[str]],
                        window: tuple[dt.datetime, dt.datetime]) -> dict:
    (lake,) = con.execute("SELECT getvariable('jh_lake')").fetchone()
    read, rows = files_read(con, day, listed, window)
    return {"lake": str(lake or ""), "day": day, "files": read, "counted_files": list(rows),
            "counted_rows": list(rows.values()), "datasets": sorted(listed), "dates": build_dates(day),
            "window_start_at": window[0], "window_end_at": window[1]}


def record_fingerprint(con: duckdb.DuckDBPyConnection, day: dt.date, listed: Mapping[str, list[str]],
                       window: tuple[dt.datetime, dt.datetime]) -> None:
    """The temp table FINGERPRINT_TABLE: what a build of `day` reads of `listed` (per dataset and
    date= folder), for the build to store as fct_warehouse_build_lake_files."""
    BUILD_SQL.temp_table(con, FINGERPRINT_TABLE, "lake_fingerprint", _fingerprint_params(con, day, listed, window))


def lake_changes(con: duckdb.DuckDBPyConnection, day: dt.date) -> tuple[list[FolderChange], list[dict]] | None:
    """(the folders whose files differ from those `day`'s build read, what it read), from a new
    listing of the lake; None when the day's build recorded nothing (not built, built before the
    record existed) or the session has no lake to list."""
    if not relation_exists(con, RELATION, temporary=False):
        return None
    if con.execute("SELECT getvariable('jh_lake')").fetchone()[0] is None:
        return None
    built = BUILD_SQL.records(con, "lake_fingerprint_built", {"day": day})
    if not built:
        return None
    datasets = sorted({r["dataset"] for r in built} & set(DATASETS))
    listed = {d: day_files(con, d, build_dates(day)) for d in datasets}
    window = (built[0]["window_start_at"], built[0]["window_end_at"])
    now = {(r["dataset"], r["partition_date"]): r
           for r in BUILD_SQL.records(con, "lake_fingerprint", _fingerprint_params(con, day, listed, window))}
    changes = []
    for row in built:
        key = (row["dataset"], row["partition_date"])
        current = now.get(key)
        if current is not None and any(row[c] != current[c] for c in COMPARED):
            changes.append(FolderChange(row["dataset"], row["partition_date"], row, current))
    return changes, built
