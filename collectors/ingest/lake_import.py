"""How an imported log lands in the lake: its identity, its files, and replacing its earlier rows.

A log is known by its source, its host and its full path (resolved: `./gpu.csv` and
`/data/a/gpu.csv` are one log, `a/gpu.csv` and `b/gpu.csv` two): `log_id`, 16 hex digits of the
SHA-256 of the three. Two different logs never replace each other's rows or quarantine; importing
the same log again (corrected, or grown) replaces the rows it gave before.

- Each row carries its log's id in the column `import_log_id`, a column of the importer's own
  beside the dataset's (the warehouse's raw views name their columns and do not read it; compaction
  keeps it, as it keeps every column a source adds).
- Its rows go to `<lake>/<dataset>/date=D/host=H/part-<source>-<stem>-<log_id>.parquet` (gpu_samples
  for a telemetry log, H its host; jobs for a scheduler's accounting, H each row's host), one
  file per UTC day and host, written atomically under that name (a second import replaces the file), and
  its rejected rows to `<lake>/_quarantine/<source>/<stem>-<log_id>.jsonl` (`nvidia_smi` for
  nvidia-smi).
- The days it wrote (and, for a log over many hosts, their hosts) are listed in `<lake>/_imports/<source>/<log_id>.json`. An import first lists
  there the old days and the new ones together (a crash then leaves no partition unknown), writes
  the new days' files, then in every listed partition takes the log's rows out of the files that
  are not its own (those a compaction merged them into), each rewritten atomically under its own
  name while holding the partition's compaction lock; a day the log no longer covers loses the
  log's file; the ledger then lists the new days. A reader may see a partition's rows twice for a
  moment (the build quarantines the second copy as a duplicate), never none of them.
- A file a re-import removes from a local lake (a day the log no longer covers) is first noted
  in `<lake>/_withdrawn/<its path in the lake>.json` (`{"path", "log_id"}`), so that ship
  withdraws it from the central lake too: ship cannot tell it from the node's retention deleting
  old partitions, whose files the central lake keeps. Writing the file again drops the note.
Object-store lakes are never compacted (warehouse.lake_compact works on folders), so there only the
log's own files are written and removed.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import PARTITION_HOST_COLUMN, SORT_KEYS, TIME_COLUMN
from joulehouse.collectors.writer import WrittenFile, partition_dir, write_parquet_atomic

LOG_ID_COLUMN = "import_log_id"
# warehouse/lake_compact.py takes the same lock for a partition (its LOCK_NAME).
COMPACTION_LOCK_NAME = "_compaction.lock"
# Notes of the files a re-import removed, for ship (module docstring); no reader's *.parquet glob
# matches them.
WITHDRAWN_DIR = "_withdrawn"


@dataclass(frozen=True)
class RejectedRow:
    """A line of the log left out: its 1-based line number (the header is line 1), why, its text."""

    line: int
    reason: str
    text: str


@dataclass
class LandedLog:
    """What an import wrote: the log's files, the files its earlier rows were taken out of, its
    quarantine file (None without rejects)."""

    log_id: str
    written: list[WrittenFile]
    rewritten: list[Path]
    quarantine_path: Path | str | None
    # partitions an earlier import of this same log had written: its rows there are replaced
    replaced_partitions: int = 0


def record_landing(result: Any, landed: LandedLog) -> None:
    """Copy what the landing (lake_stream) did onto an import's result, noting a replaced earlier
    import: a re-import (another --assume-tz, a grown log) replaces the rows it gave before, it
    never adds, and a user who only read "wrote ... rows" would think it had."""
    result.written, result.rewritten, result.quarantine_path = landed.written, landed.rewritten, landed.quarantine_path
    if landed.replaced_partitions:
        result.notes.append(f"this log was imported before: its earlier rows ({landed.replaced_partitions} day "
                            "partition(s)) are replaced, not added to")


def log_id(source: str, host: str, path: str | Path) -> str:
    """The identity of the log at `path` from `host` (see the module docstring)."""
    resolved = str(Path(path).expanduser().resolve())
    return hashlib.sha256(f"{source}\0{host}\0{resolved}".encode()).hexdigest()[:16]


def ledger_partitions(ledger: dict[str, Any], host: str) -> set[tuple[str, str]]:
    """The (day, host) partitions a ledger lists: `days` of the log's own host, and `partitions`
    of a log whose rows land under many hosts."""
    found = {(day, host) for day in ledger.get("days", [])}
    return found | {(day, part_host) for day, part_host in ledger.get("partitions", [])}


def ledger_fields(partitions: set[tuple[str, str]], host: str) -> dict[str, Any]:
    if all(part_host == host for _, part_host in partitions):
        return {"days": sorted(day for day, _ in partitions)}
    return {"partitions": sorted([day, part_host] for day, part_host in partitions)}


def safe_stem(stem: str, max_chars: int = 100) -> str:
    """A log's file stem as part of a lake file name: '_' for what a name should not hold, cut to
    `max_chars` (the name adds the source and the log's id, and a file system holds 255 bytes:
    a 230-character log name failed its import with 'File name too long')."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", stem)[:max_chars]


def split_partitions(table: pa.Table, dataset: str, host: str) -> dict[tuple[str, str], pa.Table]:
    if not table.num_rows:
        return {}
    days = pc.strftime(table.column(TIME_COLUMN[dataset]), format="%Y-%m-%d")
    host_column = PARTITION_HOST_COLUMN[dataset]
    hosts = table.column(host_column) if dataset != "gpu_samples" else pa.array([host] * table.num_rows)
    keys = set(zip(days.to_pylist(), hosts.to_pylist()))
    return {(day, part_host): table.filter(pc.and_(pc.equal(days, day), pc.equal(hosts, part_host)))
            .sort_by(SORT_KEYS[dataset]) for day, part_host in keys}


def in_partition(lake: Path | str, dataset: str, day: str, host: str, name: str) -> Path | str:
    folder = partition_dir(lake, dataset, day, host)
    return folder / name if isinstance(folder, Path) else f"{folder}/{name}"


def withdrawal_note(lake: Path | str, target: Path | str) -> Path | None:
    """Where the note that `target` was withdrawn lives; None on an object-store lake (only a
    node's local lake is shipped)."""
    if not isinstance(lake, Path) or not isinstance(target, Path):
        return None
    return lake / WITHDRAWN_DIR / f"{target.relative_to(lake).as_posix()}.json"


def remove_withdrawal_note(note: Path | None) -> None:
    if note is not None and note.exists():
        note.unlink()
        lakefs.fsync_dir(note.parent)


def withdraw_file(lake: Path | str, target: Path | str, identity: str) -> None:
    """Remove the log's file `target`, noting it first (module docstring): a crash between the
    two leaves the note beside the file, which ship ignores while the file is there; the other
    order could lose the note, and the central lake would keep the rows for good."""
    note = withdrawal_note(lake, target)
    if note is None or not isinstance(target, Path):
        remove_file(target)
        return
    if target.exists():
        write_json(note, {"path": target.relative_to(lake).as_posix(), "log_id": identity})
        target.unlink()
        lakefs.fsync_dir(target.parent)


def take_out(folder: Path, identity: str, *, keep: str) -> list[Path]:
    """Rewrite, without the rows of log `identity`, every file of `folder` but `keep` that holds
    some (a compacted file); returns the files rewritten."""
    if not folder.is_dir() or not any(_holds(path, identity) for path in folder.glob("*.parquet") if path.name != keep):
        return []  # the common case, a day never compacted: no lock taken, no lock file made
    with partition_lock(folder):
        return take_out_rows(folder, identity, keep=keep)


def take_out_rows(folder: Path, identity: str, *, keep: str) -> list[Path]:
    """`take_out`'s work, for a caller already holding the partition's lock (ship, which must
    hold it across its own copy too)."""
    rewritten = []
    for path in sorted(folder.glob("*.parquet")) if folder.is_dir() else []:
        if path.name == keep or not _holds(path, identity):
            continue
        table = pq.read_table(path)
        mine = pc.fill_null(pc.equal(table.column(LOG_ID_COLUMN), identity), False)
        rest = table.filter(pc.invert(mine))
        if rest.num_rows:
            write_parquet_atomic(rest, path)  # same name: a reader sees the old file or the new
        else:
            path.unlink()
            lakefs.fsync_dir(folder)
        rewritten.append(path)
    return rewritten


def _holds(path: Path, identity: str) -> bool:
    """Whether the lake file `path` has rows of log `identity` (its footer first: most files have
    no import column at all)."""
    if LOG_ID_COLUMN not in pq.read_schema(path).names:
        return False
    ids = pq.read_table(path, columns=[LOG_ID_COLUMN]).column(LOG_ID_COLUMN)
    return bool(pc.any(pc.fill_null(pc.equal(ids, identity), False)).as_py())


@contextmanager
def partition_lock(folder: Path) -> Iterator[None]:
    """The partition's compaction lock (blocking: a compaction of one partition takes seconds)."""
    with open(folder / COMPACTION_LOCK_NAME, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_json(target: Path | str) -> dict[str, Any]:
    try:
        if isinstance(target, Path):
            return json.loads(target.read_text(encoding="utf-8"))
        return json.loads(lakefs.filesystem(target).cat_file(target))
    except FileNotFoundError:
        return {}


def write_json(target: Path | str, value: dict[str, Any]) -> None:
    _write_bytes(target, json.dumps(value, indent=2, sort_keys=True).encode())


def _write_bytes(target: Path | str, data: bytes) -> None:
    """A whole file: renamed into place on a folder, one PUT on an object store."""
    if isinstance(target, str):
        lakefs.filesystem(target).pipe_file(target, data)
        return
    lakefs.makedirs_durably(target.parent)
    tmp = target.with_name(f".{target.name}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    lakefs.fsync_dir(target.parent)


def remove_file(target: Path | str) -> None:
    if isinstance(target, Path):
        target.unlink(missing_ok=True)
        return
    fs = lakefs.filesystem(target)
    if fs.exists(target):
        fs.rm_file(target)
