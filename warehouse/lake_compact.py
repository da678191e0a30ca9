"""Compacting a closed day's lake partitions into one file per (dataset, day, host).

A node's collector rolls a file every `roll_interval_s` (300 s), so a host's day arrives as 288
small files. Measured on a simulated 64-GPU day at 1 Hz (8 hosts): as 2,304 files of 300 s it
takes 117.9 MB, as one file per host 81.7 MB (small row groups compress worse), and the build
reads it 18% slower (11.2 s against 9.5 s); `make bench` prints the same for one host-day (288
files: 19.0 against 12.5 B per row) and the compaction's cost (about 2.8 s of CPU per million
rows). The daily DAG compacts the day's partitions of the central lake, host by host, before the
build.

Rows are kept exactly: the new file holds every row of the files it replaces as they were stored
(nothing cast or rounded; sorted as the writer sorts, written with the writer's encodings),
checked by count before the old files go. A file that does not open, or whose columns are not
the dataset's, is left where it is and named in the report (the build then reports it too).
Files that arrive during compaction (a late spool segment, ship) are not in the replaced list and
stay; a file ship replaced while it was being read (size, mtime or inode changed) stays too.

Crash safety: one compaction per partition at a time (an flock on `_compaction.lock`; a second
stops with CompactionError). Before writing, an intent file `_compaction-<id>.json` (neither name
matches the `*.parquet` glob readers use) lists the files to replace, as read, and the new file's
name. The new file is written atomically; the old files are removed; the intent is removed last.
A compaction that died part-way is finished by the next one: new file present -> remove the
listed old files still as read; new file absent -> nothing happened, drop the intent. Between
the new file landing and the old ones going, a reader can see both (the build would quarantine
the copies as duplicate_key); the DAG compacts before it builds, so its own build never does, and
the gate waits for an intent to go before it believes a change
(warehouse/lake_compactions_seen.py).

Each file removed is first written, with its size, modification time, sha256 and first and last
reading time, to the partition's ledger (`_compacted.jsonl`): ship finds there a file it would
send again (a crash cut its manifest line short) whose rows are already in the compacted file,
and records it instead of sending it; the gate, which files a compaction merged beside those a
day's build read, and whether their readings reach into that day.
Compact only the central lake the nodes ship to, never a node's own lake: ship would see the
compacted file as new and send the rows again.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import DATASETS, REQUIRED_ONE_OF, SORT_KEYS, TIME_COLUMN
from joulehouse.collectors.writer import lake_file_name, partition_dir, write_bytes_atomic, write_parquet_atomic
from joulehouse.warehouse.lake_partitions import day_hosts, host_datasets

INTENT_GLOB = "_compaction-*.json"
LOCK_NAME = "_compaction.lock"  # like the intents, matched by no reader's *.parquet glob


class CompactionError(RuntimeError):
    """Compacting a partition failed; the message names the partition and the cause. `reports`:
    what the other partitions of the same call did (compact_host_day)."""

    def __init__(self, message: str, reports: list[CompactionReport] | None = None):
        super().__init__(message)
        self.reports = list(reports or [])


@dataclass(frozen=True)
class CompactionReport:
    """What compacting one host's partition of one dataset for one day did."""

    dataset: str
    day: str
    host: str
    files_before: int
    files_after: int
    rows: int
    bytes_before: int
    bytes_after: int
    left_unreadable: list[str] = field(default_factory=list)
    finished_interrupted: int = 0

    def as_dict(self) -> dict:
        return asdict(self)


def day_partition_hosts(lake: str | Path, day: dt.date) -> list[str]:
    """The hosts with a `date=<day>` partition of any dataset (sorted)."""
    return day_hosts(_local(lake), day, DATASETS)


def compact_host_day(lake: str | Path, day: dt.date, host: str) -> list[CompactionReport]:
    """Compact every dataset's partition of `host` on `day` that has one (a local lake). A
    partition that cannot be compacted does not stop the others: it raises CompactionError at the
    end, naming each such partition, once the others are done."""
    reports, errors = [], []
    for dataset in host_datasets(_local(lake), day, host):
        try:
            reports.append(compact_partition(lake, day, host, dataset))
        except CompactionError as exc:
            errors.append(str(exc))
    if errors:
        raise CompactionError("; ".join(errors), reports)
    return reports


def compact_partition(lake: str | Path, day: dt.date, host: str, dataset: str) -> CompactionReport:
    """Rewrite one (dataset, day, host) partition's files as one file; see the module doc.
    Raises CompactionError when another compaction holds the partition or the merge fails."""
    folder = Path(partition_dir(_local(lake), dataset, day.isoformat(), host))
    if not folder.is_dir():
        return CompactionReport(dataset, day.isoformat(), host, 0, 0, 0, 0, 0)
    try:
        with _partition_lock(folder):
            finished = finish_interrupted(folder)
            return _compact_locked(folder, day, host, dataset, finished)
    except OSError as exc:  # a full or read-only lake: one line naming the partition, the others go on
        # Cut short after its file landed, some replaced files may be gone already: its intent is
        # kept, and the next compaction of the partition finishes it (finish_interrupted)
        done = ("the compaction is half done (its intent file is kept): compact the partition again to finish it"
                if any(folder.glob(INTENT_GLOB)) else "nothing of this partition was removed")
        raise CompactionError(f"{folder}: {exc.strerror or exc}; {done}") from None


def _compact_locked(folder: Path, day: dt.date, host: str, dataset: str, finished: int) -> CompactionReport:
    files = sorted(folder.glob("*.parquet"))
    bytes_before = sum(f.stat().st_size for f in files)
    if len(files) < 2:  # already one file: its footer is all there is to read
        footers = [_footer(f) for f in files]
        return CompactionReport(dataset, day.isoformat(), host, len(files), len(files), sum(n for n, _ in footers),
                                bytes_before, bytes_before, [e for _, e in footers if e], finished)
    tables, readable, left = [], [], []
    for path in files:
        stamp = _stamp(path)  # before reading: a file replaced after this is not removed
        data = path.read_bytes()  # one read: the rows merged and the hash recorded are of the same bytes
        table, problem = _read_as_stored(pa.BufferReader(data), dataset)
        if problem:
            left.append(f"{path.name}: {problem}")
        elif _stamp(path) != stamp:
            # ship replaced it while it was read: which bytes were read is not known, so it stays
            # (hashed after the read, the new file matched its own hash and was removed, its rows lost)
            left.append(f"{path.name}: replaced while it was read; compacted next time")
        else:
            tables.append(table)
            readable.append((path, stamp, hashlib.sha256(data).hexdigest(), _time_range(table, dataset)))
    rows = sum(t.num_rows for t in tables)
    if len(readable) < 2:
        return CompactionReport(dataset, day.isoformat(), host, len(files), len(files), rows,
                                bytes_before, bytes_before, left, finished)
    try:
        table = _in_dataset_order(pa.concat_tables(tables, promote_options="default"), dataset)
        table = table.sort_by(SORT_KEYS[dataset])
    except pa.ArrowException as exc:
        raise CompactionError(f"{folder}: cannot merge its files ({exc}); nothing was changed") from None
    target = folder / lake_file_name(dataset, table)
    intent = folder / f"_compaction-{uuid.uuid4().hex[:12]}.json"
    plan = {"new": target.name,
            "replaces": [{"name": p.name, "stamp": st, "sha256": digest, "first_at": first, "last_at": last}
                         for p, st, digest, (first, last) in readable]}
    write_bytes_atomic(intent, json.dumps(plan).encode())
    try:
        written = write_parquet_atomic(table, target)
        landed = pq.read_metadata(target).num_rows
    except Exception as exc:
        target.unlink(missing_ok=True)
        intent.unlink()
        raise CompactionError(f"{folder}: writing the compacted file failed ({exc}); the originals are kept") from exc
    if landed != rows:  # never remove rows that did not land; the originals stay, the new file goes
        target.unlink()
        lakefs.fsync_dir(folder)
        intent.unlink()
        raise CompactionError(f"{folder}: the compacted file held {landed} rows, not {rows}; the originals are kept")
    kept = _remove_replaced(folder, plan["replaces"], target.name)
    intent.unlink()
    replaced_bytes = sum(st[0] for p, st, _, _ in readable if p.name not in kept)
    left += [f"{name}: changed while being compacted (its rows are also in {target.name})" for name in kept]
    return CompactionReport(dataset, day.isoformat(), host, len(files), len(files) - len(readable) + 1 + len(kept),
                            rows, bytes_before, bytes_before - replaced_bytes + written.bytes, left, finished)


def _read_as_stored(path: Path | pa.BufferReader, dataset: str) -> tuple[pa.Table | None, str | None]:
    """The file's rows exactly as stored, or why it stays out of the merge: it does not open, or its
    columns are not the dataset's (a type differs, a required one is missing). Columns outside the
    schema are the source's own (NVML's power_limit_*_w, running_pids, error): the writer keeps
    them, and so does the merge. Nothing is cast or rounded, so compaction never changes a value."""
    try:
        table = pq.ParquetFile(path).read()
    except (OSError, ValueError, pa.ArrowException) as exc:
        return None, f"does not open ({exc})"
    fields = {f.name: f for f in DATASETS[dataset]}
    for index, column in enumerate(table.schema):
        if column.name in fields and pa.types.is_null(column.type):
            # another tool's column of nothing but NULLs (pandas' None): the dataset's type holds it as is
            kind = fields[column.name].type
            table = table.set_column(index, pa.field(column.name, kind), table.column(index).cast(kind))
        elif column.name in fields and column.type != fields[column.name].type:
            return None, f"column {column.name!r} is {column.type}, {dataset} stores {fields[column.name].type}"
    missing = [f.name for f in DATASETS[dataset] if not f.nullable and f.name not in table.column_names]
    if missing:
        return None, f"required columns {missing} are missing"
    for group in REQUIRED_ONE_OF.get(dataset, ()):
        if not set(group) & set(table.column_names):
            # merged, its rows were readings without power or counter, and the build's contract
            # check, which names such a file, never saw it (the DAG compacts before it builds)
            return None, f"none of the required columns {' or '.join(group)} is there"
    return table, None


def _in_dataset_order(table: pa.Table, dataset: str) -> pa.Table:
    """The dataset's columns in its order, then the sources' own columns, as the writer lays them
    out. A column only some files had is NULL in the others' rows (promote_options="default")."""
    known = [f.name for f in DATASETS[dataset]]
    return table.select([c for c in known if c in table.column_names]
                        + [c for c in table.column_names if c not in known])


def _time_range(table: pa.Table, dataset: str) -> tuple[str | None, str | None]:
    """(first, last) reading time of a file's rows (ISO 8601, UTC), for the ledger: the gate tells
    by it whether a file merged beside those a build read could hold readings of that build's day.
    (None, None) where no row has a time."""
    column = TIME_COLUMN[dataset]
    if column not in table.column_names:
        return None, None
    bounds = pc.min_max(table.column(column))
    try:
        first, last = bounds["min"].as_py(), bounds["max"].as_py()
    except (OverflowError, ValueError):  # a time past Python's year 9999: the gate takes it as unknown
        return None, None
    if first is None or last is None:
        return None, None
    return first.isoformat(), last.isoformat()


def _stamp(path: Path) -> list[int]:
    st = path.stat()
    return [st.st_size, st.st_mtime_ns, st.st_ino]


def _remove_replaced(folder: Path, replaces: list[dict], new: str) -> list[str]:
    """Remove the replaced files that are still the ones read, each first written to the ledger
    (lakefs.COMPACTED_LEDGER_NAME) with its size, sha256 and first and last reading; returns the
    names kept because they changed since (ship re-sent a file with other bytes): their new rows
    must not go. A file written again with the very bytes that were merged (a resumed ship
    re-copying what it had copied before its manifest line) goes too: kept, its rows stood twice in
    the lake, and the next compaction merged both copies for good."""
    kept, going = [], []
    for entry in replaces:
        path = folder / entry["name"]
        if not path.exists():
            continue
        if _stamp(path) != entry["stamp"] and (entry.get("sha256") is None
                                               or hashlib.sha256(path.read_bytes()).hexdigest() != entry["sha256"]):
            kept.append(entry["name"])
            continue
        going.append(path)
    # The ledger reaches the disk before the files go: ship then knows their rows are in `new`.
    lines = [json.dumps({"name": e["name"], "bytes": e["stamp"][0], "mtime_ns": e["stamp"][1], "sha256": e.get("sha256"),
                         "first_at": e.get("first_at"), "last_at": e.get("last_at"), "into": new})
             for e in replaces if folder / e["name"] in going]
    if lines:
        with open(folder / lakefs.COMPACTED_LEDGER_NAME, "a") as fh:
            fh.write("\n".join(lines) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
    for path in going:
        path.unlink()
    # The removals reach the disk before the intent goes: a power cut cannot bring back old files
    # next to the new one without the intent that says to remove them.
    lakefs.fsync_dir(folder)
    return kept


@contextmanager
def _partition_lock(folder: Path) -> Iterator[None]:
    """One compaction of a partition at a time (the CLI and the DAG, or a retry next to a live
    attempt): a second one stops at once rather than taking the first one's intent for a crash."""
    with open(folder / LOCK_NAME, "a+b") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise CompactionError(f"{folder}: another compaction is running on this partition") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _footer(path: Path) -> tuple[int, str | None]:
    """(rows, None) from the file's footer, or (0, "name: why") when it does not open."""
    try:
        return pq.read_metadata(path).num_rows, None
    except (OSError, ValueError) as exc:
        return 0, f"{path.name}: {exc}"


def finish_interrupted(folder: Path) -> int:
    """Finish or drop the compactions of `folder` that a crash interrupted; returns how many.
    Call it holding the partition's lock (compact_partition does)."""
    intents = sorted(folder.glob(INTENT_GLOB)) if folder.is_dir() else []
    for intent in intents:
        try:
            plan = json.loads(intent.read_text())
            new, replaces = plan["new"], list(plan["replaces"])
            names = [new] + [entry["name"] for entry in replaces]
            if not all(isinstance(n, str) and "/" not in n and n.endswith(".parquet") for n in names):
                raise ValueError(f"file names outside the partition: {names}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CompactionError(f"{intent}: unreadable compaction intent ({exc}); inspect the partition "
                                  "and remove the file by hand") from None
        if (folder / new).is_file():  # the new file landed whole (atomic rename): finish the job
            _remove_replaced(folder, replaces, new)
        intent.unlink()
    return len(intents)


def _local(lake: str | Path) -> Path:
    if lakefs.is_url(lake):
        raise CompactionError(f"compaction works on a local lake folder; {lake} is an object store "
                              "(set warehouse.compact_lake = false, or compact where it is mounted)")
    return Path(lakefs.lake_root(lake))


