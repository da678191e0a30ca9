"""The clean readings (stg_gpu_samples) as Parquet files beside the warehouse file, and a view.

The day's clean readings are millions of rows. Stored as a table inside the DuckDB file they were
written twice per build (the checked batch, then the table), made the file 32 bytes per reading
(a 256-GPU fleet: 700 MB a day, 25 GB at 35 days kept), and every writing step of the daily run
copies the file to publish it (warehouse/publish.py). So the build writes them once, one Parquet
file per host batch of the day, under `<db stem>/readings/stg_gpu_samples/day=YYYY-MM-DD/`, and
the DuckDB file holds only the list of the current files (`stg_gpu_samples_files`) and the view
`stg_gpu_samples` over exactly those files, with the same columns and meaning as before.

- A rebuild of a day writes new files under new names and swaps the day's rows of the list and
  the view in the build's transaction: a reader sees the old day's files or the new day's.
- Files no longer listed (a day rebuilt, or past `readings_retention_days`) stay on disk for
  `readings_superseded_keep_s`, for readers that hold an older snapshot of the file open, and are
  deleted by a later build (`sweep`), as are the files of a build that failed or died.
- A warehouse built before this (stg_gpu_samples a table) is moved to files on its next build.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import tempfile
import time
import uuid
from pathlib import Path

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.warehouse.host_batches import BUILD_SQL
from joulehouse.warehouse.publish import home_folder
from joulehouse.warehouse.sqlio import relation_exists, string_literal

VIEW = "stg_gpu_samples"
REGISTRY = "stg_gpu_samples_files"
_SCRATCH_VARIABLE = "jh_readings_folder"  # an in-memory warehouse's folder, per connection
# lz4 with v2 encodings: 130 MB for a 64-GPU day, and the fit's scans 20% cheaper than zstd's
# (measured in warehouse/SCALING.md, "The readings as files"). No dictionary past 1,024 values
# in a row group (DuckDB's default allows thousands): a measured ratio or MiB, with thousands of
# values, is then stored in its v2 encoding (byte-stream split, delta), smaller and a quarter
# cheaper to write; keys, clocks, limits and states keep their dictionaries (SCALING.md, "The
# readings' dictionaries").
PARQUET_OPTIONS = "FORMAT parquet, COMPRESSION lz4_raw, PARQUET_VERSION v2, DICTIONARY_SIZE_LIMIT 1024"


def readings_folder(con: duckdb.DuckDBPyConnection) -> Path:
    """Where the connection's warehouse keeps its readings: `<db stem>/readings/stg_gpu_samples/`
    beside the published file (also when `con` is a writer's copy of it); for an in-memory
    warehouse, a temporary folder kept for the connection's life."""
    (path,) = con.execute("SELECT path FROM duckdb_databases() WHERE database_name = current_database()").fetchone()
    if path:
        return home_folder(path) / "readings" / VIEW
    (scratch,) = con.execute(f"SELECT getvariable('{_SCRATCH_VARIABLE}')").fetchone()
    if scratch is None:
        scratch = tempfile.mkdtemp(prefix="jh-readings-")
        con.execute(f"SET VARIABLE {_SCRATCH_VARIABLE} = ?", [scratch])
    return Path(scratch)


def _copy(con: duckdb.DuckDBPyConnection, query: str, params: dict, target: Path) -> int:
    """Write the rows of `query` to the Parquet file `target`; returns how many. The rows' order
    in the file is not kept (no reader relies on it: stg's own columns say each reading's next),
    so both threads encode at once: 2.6-2.8 -> 1.8-1.9 s for a 64-GPU day's readings."""
    (kept,) = con.execute("SELECT current_setting('preserve_insertion_order')").fetchone()
    con.execute("SET preserve_insertion_order = false")
    try:
        (_, n_rows, *_) = con.execute(f"COPY ({query}) TO {string_literal(str(target))} ({PARQUET_OPTIONS}, RETURN_STATS)",
                                      params).fetchone()
    finally:
        con.execute(f"SET preserve_insertion_order = {'true' if kept else 'false'}")
    return int(n_rows)


def _durable(target: Path) -> None:
    """The file written, and its name in a day folder perhaps new, on disk before the publish that
    lists it: after a power cut the published warehouse could list a file that was lost or empty,
    and every stg_gpu_samples query failed (DuckDB's COPY does not fsync)."""
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    lakefs.fsync_dir(target.parent)  # the file's name; a new folder's own was synced when made


class ReadingsWriter:
    """The files one build writes; `discard()` deletes them when the build fails."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        self.folder = readings_folder(con)
        self.token = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{uuid.uuid4().hex[:8]}"
        self.written: list[Path] = []

    def write(self, day: dt.date, body: str, bound: dict, *, append: bool) -> int:
        """Write the rows of `body` (the day's clean readings of one host batch) as one file,
        list it for `day` (replacing the day's files unless `append`) and point the view at the
        listed files. Returns the rows written. Runs in the caller's transaction."""
        target = self.folder / f"day={day.isoformat()}" / f"{self.token}-{len(self.written):03d}.parquet"
        lakefs.makedirs_durably(target.parent)  # a new day folder's name on disk (fsynced parents)
        self.written.append(target)
        n_rows = _copy(self.con, body, bound, target)
        _durable(target)
        ensure_registry(self.con)
        if not append:
            superseded([_where_now(self.folder, p)
                        for (p,) in BUILD_SQL.execute(self.con, "readings_forget_day", {"day": day}).fetchall()])
        BUILD_SQL.execute(self.con, "readings_register", {"day": day, "path": str(target), "n_rows": n_rows})
        refresh_view(self.con)
        return n_rows

    def discard(self) -> None:
        for path in self.written:
            path.unlink(missing_ok=True)


def ensure_registry(con: duckdb.DuckDBPyConnection) -> None:
    """The file list, created empty; a warehouse whose stg_gpu_samples is still a table has its
    readings moved to files first (one file per day)."""
    if relation_exists(con, REGISTRY, temporary=False):
        return
    BUILD_SQL.execute(con, "readings_files_table")
    if relation_exists(con, VIEW, temporary=False) and _is_table(con):
        _move_table_to_files(con)


def _is_table(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = ? AND NOT temporary",
                            [VIEW]).fetchone()[0])


def _move_table_to_files(con: duckdb.DuckDBPyConnection) -> None:
    folder = readings_folder(con)
    token = f"moved-{uuid.uuid4().hex[:8]}"
    for (day,) in con.execute(f"SELECT DISTINCT day FROM {VIEW} ORDER BY day").fetchall():
        target = folder / f"day={day.isoformat()}" / f"{token}-000.parquet"
        target.parent.mkdir(parents=True, exist_ok=True)
        n_rows = _copy(con, f"SELECT * FROM {VIEW} WHERE day = $day", {"day": day}, target)
        BUILD_SQL.execute(con, "readings_register", {"day": day, "path": str(target), "n_rows": n_rows})
    con.execute(f"DROP TABLE {VIEW}")


def _where_now(folder: Path, written: str) -> Path:
    """A listed file where it is now: in `folder`, by its day folder and name. The list holds the
    paths the files were written at, and a warehouse moved or restored elsewhere (its folder beside
    it) read the old place, or nothing, and its next build's sweep deleted every readings file of
    the new place as unlisted."""
    return folder / Path(written).parent.name / Path(written).name


def listed_files(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The listed files, where they are now (_where_now)."""
    folder = readings_folder(con)
    return [str(_where_now(folder, p)) for (p,) in BUILD_SQL.execute(con, "readings_files").fetchall()]


def follow_moved_files(con: duckdb.DuckDBPyConnection) -> None:
    """On a read-only session of a warehouse moved since its last build (its view still names the
    old place), a temporary stg_gpu_samples over the files where they are now, in front of it:
    queries of the moved copy failed with 'No files found' until a build ran there."""
    if not relation_exists(con, REGISTRY, temporary=False):
        return
    folder = str(readings_folder(con)) + "/"
    written = [p for (p,) in BUILD_SQL.execute(con, "readings_files").fetchall()]
    if written and not all(p.startswith(folder) for p in written):
        listed = ", ".join(string_literal(p) for p in listed_files(con))
        con.execute(f"CREATE OR REPLACE TEMP VIEW {VIEW} AS SELECT * FROM read_parquet([{listed}], "
                    "union_by_name = true, hive_partitioning = false)")


def refresh_view(con: duckdb.DuckDBPyConnection) -> None:
    """stg_gpu_samples over exactly the listed files (union by name: a day written by an older
    version with fewer columns reads NULL in the new ones)."""
    files = listed_files(con)
    if not files:
        return  # nothing built yet: the first build's first batch lists a file
    listed = ", ".join(string_literal(p) for p in files)
    con.execute(f"CREATE OR REPLACE VIEW {VIEW} AS SELECT * FROM read_parquet([{listed}], "
                "union_by_name = true, hive_partitioning = false)")


def prune(con: duckdb.DuckDBPyConnection, day: dt.date, cutoff: dt.date) -> int:
    """Forget the readings of days <= `cutoff` but `day`; returns how many. In the caller's transaction."""
    if not relation_exists(con, REGISTRY, temporary=False):
        return 0
    forgotten = BUILD_SQL.execute(con, "readings_prune", {"cutoff": cutoff, "day": day}).fetchall()
    folder = readings_folder(con)
    superseded([_where_now(folder, path) for path, _ in forgotten])
    refresh_view(con)
    return int(sum(n_rows for _, n_rows in forgotten))


def superseded(paths: list[str | Path]) -> None:
    """Start the keep window of files just taken off the list: their modification time is now.
    Aged by when they were written, a day rebuilt (or pruned) more than keep_s after its build was
    deleted at the very next build, under a reader that still read it (a backfill's second day).
    Should the build then roll back, they are listed again and the sweep leaves them alone."""
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            os.utime(path)


def sweep(con: duckdb.DuckDBPyConnection, keep_s: float) -> int:
    """Delete the readings files no longer listed and older than `keep_s` (superseded by a
    rebuild or past the retention, counted from then: `superseded`; or left by a failed build,
    counted from its write); returns how many were deleted.
    Run before a build opens its transaction, so the list is the published one."""
    folder = readings_folder(con)
    if not folder.is_dir() or not relation_exists(con, REGISTRY, temporary=False):
        return 0
    refresh_view(con)  # a warehouse moved since its last build reads its files where they are now
    listed = set(listed_files(con))
    deadline, deleted = time.time() - keep_s, 0
    for path in folder.glob("day=*/*.parquet"):
        if str(path) not in listed and path.stat().st_mtime <= deadline:
            path.unlink(missing_ok=True)
            deleted += 1
    for day_folder in folder.glob("day=*"):
        if day_folder.is_dir() and not any(day_folder.iterdir()):
            os.rmdir(day_folder)
    return deleted


class ReadingsPastRetention(RuntimeError):
    """A day's readings were taken out under warehouse.readings_retention_days: what reads them
    (the data checks) cannot judge the day again without a rebuild."""


def refuse_pruned_day(con: duckdb.DuckDBPyConnection, day: dt.date, what: str) -> None:
    """Raise ReadingsPastRetention when `day`'s readings are past retention: checked again, the
    day read as 0 readings, stopped, and its stored results were replaced by that false stop."""
    reason = why_no_readings(con, day)
    if reason is not None and "past retention" in reason:
        raise ReadingsPastRetention(f"{what} of {day} not run: {reason}; rebuild the day to check it again "
                                    "(its stored results are left as they were)")


def why_no_readings(con: duckdb.DuckDBPyConnection, day: dt.date) -> str | None:
    """Why stg_gpu_samples holds no reading of `day`, when the warehouse can tell: the day was
    never built, or its readings are past retention; None otherwise (or without the build log). A
    query over them then says so instead of answering an empty table (the day's facts stay)."""
    if not relation_exists(con, "fct_warehouse_build_daily", temporary=False):
        return None
    built, pruned_at = BUILD_SQL.execute(con, "readings_day_state", {"day": day}).fetchone()
    if not built:
        return f"{day} is not built in this warehouse"
    if pruned_at is not None:
        return (f"the readings of {day} (stg_gpu_samples) are past retention: a later build took them out at "
                f"{pruned_at:%Y-%m-%d %H:%M} UTC (warehouse.readings_retention_days); the day's hourly and daily "
                "facts are kept")
    return None
