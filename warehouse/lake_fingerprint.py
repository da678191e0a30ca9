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
size and modification time) and every file that came is what they were merged into, and nothing
else merged in could hold readings of D's window: each other file the ledger names as merged into
the same one is a change where its first and last reading (kept in the ledger) reach into the
window, or the ledger does not say them, or it lay in D's own folder. A late file of a host that
already reached across midnight, merged before any gate listed it, changed no host list and no
file the build read, and passed. A file rewritten under its own name (a re-import with corrected
readings, as many as before) is a change.

Cost: a listing and a stat per file (read_blob without its content opens no file), and one more
read of each file's footer (the lake contract's check reads their schemas apart): 0.04 s of a
256-GPU build, 1.4 s on an uncompacted lake of 6,912 files. A gate checks three built days (those
whose builds read its folder), whose folders overlap: it lists each partition once and reads each
footer once (`LakeLook`; on 3,600 files over three days its listings took 0.085 s a gate, 0.049 s
listed once, of about 1 s a gate, most of it the footers).
A footer that cannot be read is found by halving the list, not one query per file; a file whose
footer has no time statistics has its times read.

A compaction is not atomic to a reader: from its new file landing until its ledger line is written
a folder holds every reading twice, and until its old files are removed some twice. A gate that
finds a local folder changed looks at it once more, after waiting for the compactions under way
there (their intent files, younger than COMPACTION_WAIT_S) to end, so one caught half done, or
one that ended between the listing and the verdict, is no change. Left open: a compaction of the
same folder that starts and ends within that second look (a false 'rebuild', said again or not by
the next gate); one cut short, or still running after the wait, is named in the result.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.collectors.input_file import open_regular
from joulehouse.collectors.schema import DATASETS, TIME_COLUMN
from joulehouse.warehouse.lake_compact import INTENT_GLOB
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
# A compaction's intent lives from its new file's writing to its old files' removal: seconds. The
# gate waits for one that is younger than this; an older one was cut short and waits for nobody.
COMPACTION_WAIT_S = 60.0
COMPACTION_POLL_S = 0.5
_sleep = time.sleep  # a test lets a compaction go on while the gate waits


@dataclass(frozen=True)
class FolderChange:
    """One date= folder of one dataset whose files differ from those the build read; `rewritten`:
    files of the build's that changed otherwise than by a compaction (the first few); `merged_in`:
    files the build did not read that a compaction merged with those it read, whose readings
    reach into its window or are not known (the first few); `compacting`: the intents of the
    compactions under way or cut short in the folder when the gate looked again."""

    dataset: str
    partition_date: dt.date
    built: dict
    now: dict
    rewritten: tuple[str, ...] = ()
    merged_in: tuple[str, ...] = ()
    compacting: tuple[str, ...] = ()


class LakeLook:
    """What one gate sees of the lake: each (dataset, date=) partition listed once and each file's
    footer read once, whichever of the built days it checks asks first (the three days' folders
    overlap: each partition was listed up to three times a gate)."""

    def __init__(self) -> None:
        self.listed: dict[tuple[str, dt.date], list[str]] = {}
        self.footers: dict[str, tuple] = {}

    def files(self, con: duckdb.DuckDBPyConnection, dataset: str, dates: list[dt.date]) -> list[str]:
        """The Parquet files of `dataset` in the date= partitions `dates`, sorted; those not
        listed before listed in one glob."""
        missing = [d for d in dates if (dataset, d) not in self.listed]
        if missing:
            by_name = {d.isoformat(): d for d in missing}
            for d in missing:
                self.listed[(dataset, d)] = []
            for f in day_files(con, dataset, missing):
                self.listed[(dataset, by_name[_partition_name(f)])].append(f)
        return sorted(f for d in dates for f in self.listed[(dataset, d)])

    def forget(self, dataset: str, date: dt.date) -> None:
        """List the partition again when next asked, and read its files' footers again."""
        for f in self.listed.pop((dataset, date), []):
            self.footers.pop(f, None)


def _partition_name(path: str) -> str:
    """The date= folder's name of a listed lake file (.../<dataset>/date=<name>/host=<h>/<file>)."""
    return posixpath.basename(posixpath.dirname(posixpath.dirname(path))).removeprefix("date=")


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
                 look: LakeLook | None = None) -> tuple[list[FolderChange], list[dict]] | None:
    """(the folders whose files differ from those `day`'s build read, what it read), from a new
    listing of the lake (`look`: what this gate listed and read before, added to); None when the
    day's build recorded nothing (not built, built before the record existed) or the session has no
    lake to list. A local lake's folders that differ are looked at once more, after the compactions
    under way in them (COMPACTION_WAIT_S at most): one caught half done is no change."""
    if not relation_exists(con, RELATION, temporary=False):
        return None
    (lake,) = con.execute("SELECT getvariable('jh_lake')").fetchone()
    if lake is None:
        return None
    built = BUILD_SQL.records(con, "lake_fingerprint_built", {"day": day})
    if not built:
        return None
    look = LakeLook() if look is None else look
    changes = _compared(con, day, lake, built, look)
    if not changes or lakefs.is_url(lake):
        return changes, built
    changed = {(c.dataset, c.partition_date) for c in changes}
    _wait_for_compactions(lake, changed)
    for dataset, date in changed:
        look.forget(dataset, date)
    changes = _compared(con, day, lake, built, look)
    return [replace(c, compacting=tuple(_compaction_intents(lake, {(c.dataset, c.partition_date)})))
            for c in changes], built


def _compared(con: duckdb.DuckDBPyConnection, day: dt.date, lake: str, built: list[dict],
              look: LakeLook) -> list[FolderChange]:
    """The folders of `built` (what `day`'s build read) whose files differ in the lake now."""
    datasets = sorted({r["dataset"] for r in built} & set(DATASETS))
    listed = {d: look.files(con, d, build_dates(day)) for d in datasets}
    window = (built[0]["window_start_at"], built[0]["window_end_at"])
    now = {(r["dataset"], r["partition_date"]): r for r in BUILD_SQL.records(
        con, "lake_fingerprint", _fingerprint_params(con, day, listed, window, look.footers))}
    changes = []
    for row in built:
        current = now.get((row["dataset"], row["partition_date"]))
        if current is None:
            continue
        rewritten, merged_in = ([], []) if row.get("files") is None else _not_compacted(
            lake, row["files"], current["files"], window, own_folder=row["partition_date"] == day)
        if rewritten or merged_in or any(row[c] != current[c] for c in COMPARED):
            changes.append(FolderChange(row["dataset"], row["partition_date"], row, current,
                                        tuple(rewritten[:3]), tuple(merged_in[:3])))
    return changes


def _compaction_intents(lake: str, folders: set[tuple[str, dt.date]]) -> list[str]:
    """The intents (warehouse/lake_compact.py) of the compactions under way or cut short in the
    host folders of `folders` ((dataset, date=) of a local lake), as paths under the lake."""
    root = Path(lake)
    return sorted(str(p.relative_to(root)) for dataset, date in folders
                  for p in root.glob(f"{dataset}/date={date.isoformat()}/*/{INTENT_GLOB}"))


def _wait_for_compactions(lake: str, folders: set[tuple[str, dt.date]]) -> None:
    """Return once no compaction in `folders` is under way, or after COMPACTION_WAIT_S. An intent
    older than that is a compaction cut short (it stays until the partition's next compaction):
    no reason to wait."""
    for _ in range(int(COMPACTION_WAIT_S / COMPACTION_POLL_S)):
        oldest_live = time.time() - COMPACTION_WAIT_S
        live = [p for p in _compaction_intents(lake, folders) if _modified_s(Path(lake) / p) > oldest_live]
        if not live:
            return
        _sleep(COMPACTION_POLL_S)


def _modified_s(path: Path) -> float:
    try:
        return path.lstat().st_mtime
    except OSError:  # gone since it was listed: its compaction is over
        return 0.0


def _not_compacted(lake: str, built: list[dict], now: list[dict], window: tuple[dt.datetime, dt.datetime],
                   own_folder: bool) -> tuple[list[str], list[str]]:
    """(the files of `built` (as the build read them) that are gone or changed otherwise than by a
    compaction, then the files of `now` no compaction of them made; the files a compaction merged
    with those of `built` that `built` lacks, and whose readings may reach into `window`: any of
    the day's own folder, whose every file the build reads). ([], []) when the difference is
    compactions of the files read alone. Only a local lake keeps ledgers (an object store is not
    compacted)."""
    stamp = lambda f: (f["size_bytes"], f["modified_at"])  # noqa: E731
    before, after = {f["path"]: stamp(f) for f in built}, {f["path"]: stamp(f) for f in now}
    gone = [p for p in before if after.get(p) != before[p]]
    came = [p for p in after if before.get(p) != after[p]]
    if not gone and not came:
        return [], []
    if lakefs.is_url(lake):
        return gone + came, []
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
    # The files a compaction took in beside those the build read: a late file of a host that already
    # reached across midnight, merged before any gate listed it, changed no host list and no file
    # the build read, and passed (review). Only its readings, kept in the ledger, can excuse it.
    merged_in = [path for into in sorted(merged_into)
                 for path, entry in _merged_inputs(ledgers[posixpath.dirname(into)], into, before)
                 if path not in unexplained and (own_folder or _reaches(_ledger_times(entry), *window))]
    return list(dict.fromkeys(unexplained + [p for p in came if p not in merged_into])), merged_in


def _merged_inputs(ledger: Mapping[str, dict], into: str, read: Mapping[str, tuple]) -> list[tuple[str, dict]]:
    """(path, ledger entry) of each file merged into `into` (a path under the lake), through earlier
    compactions of its inputs, that is not one of `read` (path -> (size, mtime) as a build read
    it): files the build never read."""
    folder = posixpath.dirname(into)
    inputs: dict[str, list[dict]] = {}
    for entry in ledger.values():
        inputs.setdefault(str(entry.get("into")), []).append(entry)
    found, seen, todo = [], set(), [posixpath.basename(into)]
    while todo:
        for entry in inputs.get(todo.pop(), []):
            name = entry["name"]
            path = f"{folder}/{name}"
            if name in seen:  # a cycle in a hostile ledger
                continue
            seen.add(name)
            if path in read and _as_read(entry, *read[path]):
                continue
            if name in inputs:  # itself the result of a compaction after the build: its inputs say
                todo.append(name)
            else:
                found.append((path, entry))
    return found


def _ledger_times(entry: Mapping[str, object]) -> tuple:
    """A ledger entry's (first_at, last_at, None), as a footer's; (None, None, None) where the
    ledger does not say (a line from before it kept the times, a value that is no time)."""
    try:
        first, last = (dt.datetime.fromisoformat(entry[k]) for k in ("first_at", "last_at"))
    except (KeyError, TypeError, ValueError):
        return None, None, None
    if first.tzinfo is None or last.tzinfo is None:
        return None, None, None
    return first, last, None


def _epoch_us(at: dt.datetime) -> int:
    return (at - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


def _as_read(entry: Mapping[str, object], size_bytes: int, modified_at: dt.datetime) -> bool:
    """Whether a ledger entry is the very file a build read: its size and modification time (a
    rewrite in place of as many bytes, then compacted, passed on the size alone); a ledger line
    without the time excuses nothing."""
    mtime_ns = entry.get("mtime_ns")
    return entry.get("bytes") == size_bytes and isinstance(mtime_ns, int) and mtime_ns // 1000 == _epoch_us(modified_at)


def _merged_into(ledger: Mapping[str, dict], path: str, size_bytes: int, modified_at: dt.datetime,
                 present: Mapping[str, object]) -> str | None:
    """The file of `present` that `path` (under the lake, as the build read it) was merged into,
    following its partition's `ledger` (and later compactions of the result); None where the
    ledger does not say so."""
    folder = posixpath.dirname(path)
    entry = ledger.get(posixpath.basename(path))
    if entry is None or not _as_read(entry, size_bytes, modified_at):
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
