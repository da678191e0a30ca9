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
change is excused only when the partition's compaction ledger says the files read were merged into
those there now and that nothing merged in with them could reach D (none from D's own folder, none
with readings in the window, none of times the ledger does not say): the rule is
warehouse/lake_compactions_seen.py's. A file rewritten under its own name is a change.

Cost: a listing and a stat per file (read_blob without its content opens no file), and one more
read of each file's footer (the lake contract's check reads their schemas apart): 0.04 s of a
256-GPU build, 1.4 s on an uncompacted lake of 6,912 files. A gate checks three built days (those
whose builds read its folder), whose folders overlap: it lists each partition once and reads each
footer once (`LakeLook`; on 3,600 files over three days its listings took 0.085 s a gate, 0.049 s
listed once, of about 1 s a gate, most of it the footers).
A footer that cannot be read is found by halving the list, not one query per file; a file whose
footer has no time statistics has its times read.

A compaction is not atomic to a reader (a folder holds readings twice while one is under way): a
gate that finds a local folder changed looks at it once more, after the compactions under way there
end; what that leaves open is in warehouse/lake_compactions_seen.py.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, replace

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import DATASETS, TIME_COLUMN
from joulehouse.warehouse import lake_compactions_seen as compactions
from joulehouse.warehouse.lake_contract import build_dates, day_files
from joulehouse.warehouse.sqlio import SqlFiles, columns_of, relation_exists

BUILD_SQL = SqlFiles("joulehouse.warehouse", "build_sql")
# The temp table fct_warehouse_build_lake_files.sql reads: the fingerprint taken when the build
# listed the lake, before it read a row (a file changed while it read is then seen as changed).
FINGERPRINT_TABLE = "jh_build_lake_fingerprint"
RELATION = "fct_warehouse_build_lake_files"
COMPARED = ("n_rows", "hosts")


@dataclass(frozen=True)
class FolderChange:
    """One date= folder of one dataset whose files differ from those the build read; `rewritten`:
    files of the build's that changed otherwise than by a compaction; `merged_in`: files the build
    did not read that a compaction merged with those it read, whose readings reach into its
    window or are not known (the gate names a few and counts the rest); `compacting`: the intents of the
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
        # when this gate stops waiting for compactions (compactions.wait_ends_s), set by its first wait
        self.compaction_wait_ends_s: float | None = None

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
    read = sorted(f for f in every if own_folder in f or compactions.reaches(footers[f], start, end))
    return read, {f: footers[f][2] for f in read}


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
    under way in them (compactions.COMPACTION_WAIT_S at most, for all the days `look` serves): one
    caught half done is no change."""
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
    if look.compaction_wait_ends_s is None:
        look.compaction_wait_ends_s = compactions.wait_ends_s()
    compactions.wait_for_compactions(lake, changed, look.compaction_wait_ends_s)
    for dataset, date in changed:
        look.forget(dataset, date)
    changes = _compared(con, day, lake, built, look)
    return [replace(c, compacting=tuple(compactions.compaction_intents(lake, {(c.dataset, c.partition_date)})))
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
        rewritten, merged_in = ([], []) if row.get("files") is None else compactions.not_compacted(
            lake, row["files"], current["files"], window, own_folder=row["partition_date"] == day)
        if rewritten or merged_in or any(row[c] != current[c] for c in COMPARED):
            changes.append(FolderChange(row["dataset"], row["partition_date"], row, current,
                                        tuple(rewritten), tuple(merged_in)))
    return changes
