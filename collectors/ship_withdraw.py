"""What a re-import replaced or removed on the node, replaced or removed at the central lake.

A re-imported log (`joulehouse ingest ...` again: another --assume-tz, a corrected or grown
file; collectors/ingest/lake_import.py) rewrites its file under the same name, and removes its
file from a day it no longer covers (its rows moved across midnight). Copying the new files
alone left the central lake holding old rows beside new ones, counting that energy twice:

- a removed file stayed at the central lake: ship only ever added files. The import notes each
  file it removes under `<lake>/_withdrawn/` (the node's retention also removes shipped files,
  and those the central lake keeps, so a file merely missing is not withdrawn); ship removes
  the file at the destination, then records `withdrawn` in its manifest.
- the central lake's compaction (the daily DAG) had merged the old file into another and
  removed it, so the replacement or removal found no old copy there, while the merged file
  kept the old rows. An imported row carries its log's id (`import_log_id`): at a folder
  destination ship takes that log's rows out of every other file of the partition, as the
  import does in the node's lake.

At a folder, the copy or removal and the taking out happen under the partition's compaction lock,
so a compaction cannot merge the new copy in between and have it taken out as well. The manifest
line is written after both: a crash anywhere before it leaves the file unrecorded (or still
recorded as shipped), and the next run does both again; a second time finds nothing more to
take out. An object store is never compacted (warehouse.lake_compact works on folders), so there
removing the file or overwriting it is all there is. A file without the import column (a
collector's, redone by the DCGM source) has no id to find its merged rows by: it is overwritten
as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.ingest.lake_import import LOG_ID_COLUMN, WITHDRAWN_DIR, partition_lock, take_out_rows

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class Withdrawal:
    """A shipped file the node's re-import removed: its path relative to the lake, and the id of
    the log whose rows it held."""

    path: str
    log_id: str


def pending_withdrawals(lake: Path, shipped: dict[str, Any]) -> list[Withdrawal]:
    """The files noted as withdrawn that the destination may still have (`shipped`: the
    manifest's latest entry per path; not yet recorded withdrawn) and the lake does not: a note
    beside its file again is a re-import that wrote it again or one a crash stopped before
    removing it, and the file is what counts. A path the manifest has no line for is withdrawn
    too: a crash may have cut its line after the copy (and the destination's compaction merged
    it since), and removing what is not there is done once, then recorded."""
    notes = lake / WITHDRAWN_DIR
    found = []
    for note in sorted(notes.rglob("*.parquet.json")) if notes.is_dir() else []:
        rel = note.relative_to(notes).as_posix().removesuffix(".json")
        entry = shipped.get(rel)
        if (entry is not None and entry.withdrawn) or (lake / rel).exists():
            continue
        try:
            log_id = json.loads(note.read_text(encoding="utf-8"))["log_id"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Written whole by a rename, so this is damage, not a crash: say so and go on; the
            # file itself is still withdrawn, only its merged rows (if any) cannot be found.
            log.warning("ship: withdrawal note %s is unreadable (%s); removing %s at the destination without "
                        "taking its log's rows out of compacted files", note, exc, rel)
            log_id = ""
        found.append(Withdrawal(rel, str(log_id)))
    return found


def log_id_of(path: Path) -> str | None:
    """The id of the imported log whose file `path` is (all its rows carry it), else None."""
    try:
        if LOG_ID_COLUMN not in pq.read_schema(path).names:
            return None
        ids = pc.unique(pq.read_table(path, columns=[LOG_ID_COLUMN]).column(LOG_ID_COLUMN)).to_pylist()
    except (OSError, ValueError, pa.ArrowException):
        # gone meanwhile (the copy then fails and says so), or not Parquet a reader can open:
        # no import's file, so shipped over its old copy as any changed file is
        return None
    return ids[0] if len(ids) == 1 and ids[0] else None


@contextmanager
def locked_partition(folder: Path | None) -> Iterator[None]:
    """The partition's compaction lock at a folder destination. No folder yet: no compacted file
    to take rows out of, and nothing to lock."""
    with partition_lock(folder) if folder is not None and folder.is_dir() else nullcontext():
        yield


def remove_at_destination(fs: Any, final: str, *, local: bool) -> None:
    """Remove `final` at the destination, durably at a folder; already gone is done."""
    if local:
        path = Path(final)
        path.unlink(missing_ok=True)
        if path.parent.is_dir():
            lakefs.fsync_dir(path.parent)
        return
    if fs.exists(final):
        fs.rm(final)


def replace_file(folder: Path | None, path: Path, ship: Callable[[], T]) -> T:
    """`ship()` the node's file `path` over its earlier version, then take its log's rows out of
    the other files of the destination's partition `folder` (None: not a folder, no compaction),
    both under the partition's lock (module docstring)."""
    log_id = log_id_of(path) if folder is not None else None
    if log_id is None:
        return ship()
    with locked_partition(folder):
        entry = ship()
        take_out_at_destination(folder, log_id, keep=path.name)
    return entry


def withdraw_file(fs: Any, root: str, folder: Path | None, withdrawal: Withdrawal) -> None:
    """Remove a withdrawn file at the destination, and its log's rows from the files of its
    partition `folder` (None: not a folder) that a compaction merged them into."""
    with locked_partition(folder):
        remove_at_destination(fs, f"{root}/{withdrawal.path}", local=folder is not None)
        if folder is not None:
            take_out_at_destination(folder, withdrawal.log_id, keep=withdrawal.path.rsplit("/", 1)[-1])


def take_out_at_destination(folder: Path, log_id: str, *, keep: str) -> list[Path]:
    """Take log `log_id`'s rows out of every file of the destination's partition `folder` but
    `keep` (call it holding locked_partition); returns the files rewritten."""
    if not log_id:
        return []
    rewritten = take_out_rows(folder, log_id, keep=keep)
    for path in rewritten:
        log.info("ship: took log %s's earlier rows out of %s at the destination (its compaction had merged them)",
                 log_id, path)
    return rewritten
