"""What a day's build read from the lake, and whether the lake still holds just that.

The daily build of day D reads D's date= folder and, for the readings that bridge midnight, the
neighbouring days' files whose readings reach into D's margin. A node that ships after D was built,
or the next day's first files arriving after it (they bridge D's last minutes), change what a build
of D would read: D's facts are then stale, not wrong. So the build records, per dataset and date=
folder, what it read (fct_warehouse_build_lake_files), and the gate lists the lake again and
compares (`lake_changes`): a folder that differs is a reason to re-run that day.

What is compared must survive a compaction, which rewrites a host's files of a day into one with
the same rows (warehouse/lake_compact.py; the DAG compacts day D+1 after D was built, and a plain
comparison of files called every day stale): the readings of D's own folder (the files' footers),
of a neighbouring folder the hosts with files reaching into D, and the files themselves, where a
change is excused when every file that went is in its partition's compaction ledger (with its
size) and every file that came is what they were merged into. A file rewritten under its own name
(a re-import with corrected readings, as many as before) is a change. Not seen: a late file that
a compaction merged before the gate looked, whose host already reached across midnight.

Cost: a listing and a stat per file (read_blob without its content opens no file), and one more
read of each file's footer (the lake contract's check reads their schemas apart): 0.04 s of a
256-GPU build, 1.4 s on an uncompacted lake of 6,912 files. The gate lists and reads the same
again for each built day it checks (three a gate: the days whose builds read its folder). A footer that cannot be read is found by halving the
list, not one query per file; a file whose footer has no time statistics has its times read. A
gate that lists a partition while it is being compacted can see files half replaced: its 'rebuild'
result may then say so until the next gate looks again.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.collectors.input_file import open_regular
from joulehouse.collectors.schema import DATASETS, TIME_COLUMN
from joulehouse.warehouse.lake_contract import build_dates, day_files
from joulehouse.warehouse.sqlio import SqlFiles, columns_of, relation_exists

BUILD_SQL = SqlFiles("joulehouse.warehouse", "build_sql")
# The temp table fct_warehouse_build_lake_files.sql reads: the fingerprint taken when the build
# listed the lake, before it read a row (a file changed while it read is then seen as changed).
FINGERPRINT_TABLE = "jh_build_lake_fingerprint"
RELATION = "fct_warehouse_build_lake_files"
COMPARED = ("n_rows", "hosts")
# A partition's ledger holds a line per file compacted away: 288 a day at the collector's roll.
MAX_LEDGER_BYTES = 16 << 20


@dataclass(frozen=True)
class FolderChange:
    """One date= folder of one dataset whose files differ from those the build read; `rewritten`:
    files of the build's that changed otherwise than by a compaction (the first few)."""

    dataset: str
    partition_date: dt.date
    built: dict
    now: dict
    rewritten: tuple[str, ...] = ()


def build_window(day: dt.date, margin_s: float) -> tuple[dt.datetime, dt.datetime]:
    """[start, end] of the readings a build of `day` reads (UTC): the day and `margin_s` either side."""
    midnight = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    margin = dt.timedelta(seconds=margin_s)
    return midnight - margin, midnight + dt.timedelta(days=1) + margin


def files_read(con: duckdb.DuckDBPyConnection, day: dt.date, listed: Mapping[str, list[str]],
               window: tuple[dt.datetime, dt.datetime],
               footers: dict[str, tuple] | None = None) -> tuple[list[str], dict[str, int | None]]:
    """(of `listed` (dataset -> files of the day's and its neighbours' date= folders), those a build
    of `day` takes readings from: all of the day's own, and each neighbour's whose time range
    reaches into `window` (its footer's, else its rows'; a file that cannot be read counts); {file:
    its rows, None where its footer cannot be read}). The next day's folder grows all day; its
    files of later hours change nothing of `day`. `footers`: those read before in the same check
    (one gate checks three days, whose folders overlap), added to."""
    own_folder = f"/date={day.isoformat()}/"
    every = [f for files in listed.values() for f in files]
    start, end = window
    footers = _footers(con, every, {} if footers is None else footers)
    read = sorted(f for f in every if own_folder in f or _reaches(footers[f], start, end))
    return read, {f: footers[f][2] for f in read}


def _reaches(footer: tuple, start: dt.datetime, end: dt.datetime) -> bool:
    first, last, _ = footer
    return first is None or last is None or (first <= end and last >= start)


def _footers(con: duckdb.DuckDBPyConnection, files: list[str], known: dict[str, tuple]) -> dict[str, tuple]:
    """{file: (first_at, last_at, n_rows)} of `files`, those not in `known` read from their
    footers and added to it; (None, None, None) for a file whose footer cannot be read."""
    missing = [f for f in files if f not in known]
    known.update(_read_footers(con, missing))
    return {f: known[f] for f in files}


def _read_footers(con: duckdb.DuckDBPyConnection, files: list[str]) -> dict[str, tuple]:
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
        return {**_read_footers(con, files[:half]), **_read_footers(con, files[half:])}
    found = {f: (first, last, n_rows) for f, first, last, n_rows in rows}
    for f, (first, last, n_rows) in found.items():
        if n_rows and (first is None or last is None):  # a footer without statistics: read the times
            try:
                first, last = BUILD_SQL.execute(con, "file_time_range_read", {
                    "file": f, "time_column": TIME_COLUMN[_dataset_of(f)]}).fetchone()
            except (duckdb.Error, KeyError):
                continue
            found[f] = (first, last, n_rows)
    return found


def _dataset_of(path: str) -> str:
    """The dataset of a lake file: the folder above its date= folder."""
    return posixpath.basename(posixpath.dirname(posixpath.dirname(posixpath.dirname(path))))


def _fingerprint_params(con: duckdb.DuckDBPyConnection, day: dt.date, listed: Mapping[str, list[str]],
                        window: tuple[dt.datetime, dt.datetime], footers: dict[str, tuple] | None = None) -> dict:
    (lake,) = con.execute("SELECT getvariable('jh_lake')").fetchone()
    read, rows = files_read(con, day, listed, window, footers)
    return {"lake": str(lake or ""), "day": day, "files": read, "counted_files": list(rows),
            "counted_rows": list(rows.values()), "datasets": sorted(listed), "dates": build_dates(day),
            "window_start_at": window[0], "window_end_at": window[1]}


def record_fingerprint(con: duckdb.DuckDBPyConnection, day: dt.date, listed: Mapping[str, list[str]],
                       window: tuple[dt.datetime, dt.datetime]) -> None:
    """The temp table FINGERPRINT_TABLE: what a build of `day` reads of `listed` (per dataset and
    date= folder), for the build to store as fct_warehouse_build_lake_files."""
    BUILD_SQL.temp_table(con, FINGERPRINT_TABLE, "lake_fingerprint", _fingerprint_params(con, day, listed, window))
    if relation_exists(con, RELATION, temporary=False) and "files" not in columns_of(con, RELATION):
        # a record from before the file lists were kept cannot take this day's rows: its days read
        # from now on as built before the record existed (no 'rebuild' check), not as a failed build
        con.execute(f"DROP TABLE {RELATION}")


def lake_changes(con: duckdb.DuckDBPyConnection, day: dt.date,
                 footers: dict[str, tuple] | None = None) -> tuple[list[FolderChange], list[dict]] | None:
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
           for r in BUILD_SQL.records(con, "lake_fingerprint", _fingerprint_params(con, day, listed, window, footers))}
    (lake,) = con.execute("SELECT getvariable('jh_lake')").fetchone()
    changes = []
    for row in built:
        key = (row["dataset"], row["partition_date"])
        current = now.get(key)
        if current is None:
            continue
        rewritten = [] if row.get("files") is None else _not_compacted(lake, row["files"], current["files"])
        if rewritten or any(row[c] != current[c] for c in COMPARED):
            changes.append(FolderChange(row["dataset"], row["partition_date"], row, current, tuple(rewritten[:3])))
    return changes, built


def _not_compacted(lake: str, built: list[dict], now: list[dict]) -> list[str]:
    """The files of `built` (as the build read them) that are gone or changed otherwise than by a
    compaction, then the files of `now` no compaction of them made; [] when the difference is
    compactions alone. Only a local lake keeps ledgers (an object store is not compacted)."""
    stamp = lambda f: (f["size_bytes"], f["modified_at"])  # noqa: E731
    before, after = {f["path"]: stamp(f) for f in built}, {f["path"]: stamp(f) for f in now}
    gone = [p for p in before if after.get(p) != before[p]]
    came = [p for p in after if before.get(p) != after[p]]
    if not gone and not came:
        return []
    if lakefs.is_url(lake):
        return gone + came
    merged_into, unexplained, ledgers = set(), [], {}
    for path in gone:
        folder = posixpath.dirname(path)
        if folder not in ledgers:  # a compacted host-day has hundreds of files gone, one ledger
            ledgers[folder] = _ledger(Path(lake) / folder / lakefs.COMPACTED_LEDGER_NAME)
        into = None if path in after else _merged_into(ledgers[folder], path, *before[path], after)
        if into is None:
            unexplained.append(path)
        else:
            merged_into.add(into)
    return list(dict.fromkeys(unexplained + [p for p in came if p not in merged_into]))  # a rewrite: gone and came


def _epoch_us(at: dt.datetime) -> int:
    return (at - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


def _merged_into(ledger: Mapping[str, dict], path: str, size_bytes: int, modified_at: dt.datetime,
                 present: Mapping[str, object]) -> str | None:
    """The file of `present` that `path` (under the lake, as the build read it) was merged into,
    following its partition's `ledger` (and later compactions of the result); None where the
    ledger does not say so."""
    folder = posixpath.dirname(path)
    entry = ledger.get(posixpath.basename(path))
    # the very file the build read: its size and modification time (a rewrite in place of as many
    # bytes, then compacted, passed on the size alone); a ledger line without the time excuses nothing
    if entry is None or entry.get("bytes") != size_bytes or entry.get("mtime_ns") is None \
            or entry["mtime_ns"] // 1000 != _epoch_us(modified_at):
        return None
    for _ in range(8):  # a compacted file compacted again: a short chain, never a cycle
        into = f"{folder}/{entry.get('into')}"
        if into in present:
            return into
        entry = ledger.get(posixpath.basename(into))
        if entry is None:
            return None
    return None


def _ledger(path: Path) -> dict[str, dict]:
    """{file name: its ledger entry} of a partition's compaction ledger; {} without one."""
    try:  # the lake is hostile input: a FIFO there would hold the gate, a huge file its memory
        with open(open_regular(path, "compaction ledger", OSError), "rb") as fh:
            text = fh.read(MAX_LEDGER_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return {}
    return lakefs.parse_compaction_ledger(text)
