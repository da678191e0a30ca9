"""Writing the warehouse without locking out its readers: build a copy, publish it by rename.

DuckDB locks its file: a writable open fails while any other process holds it, even read-only (a
`joulehouse sql | less`, a notebook, the `duckdb` CLI), and a read-only open fails while a
writer holds it. So a writing step of the daily run never opens `db_path` itself. Under the
writer lock it copies the published file to a file of its own, writes that, closes it (DuckDB
checkpoints on close, so the copy is whole without its WAL), fsyncs it and renames it over
`db_path` with `os.replace`, atomic on POSIX:
- a reader that opened the old file keeps reading it (its inode) until it reconnects; one that
  opens after the rename reads the new file. Either way it sees whole steps, never a half-written
  one, and nobody's open connection makes the writer fail;
- a step that fails is not published unless the caller says its error leaves the work stored
  (`publish_on`: a blocking check stores its results, then fails the day); its copy is deleted;
- writers queue on the lock (`fcntl.flock`, released by the kernel if the process dies), so two
  steps never both copy the same file and lose one's work.

The lock and the copies live in `<db stem>/.writer/` beside the file (`warehouse.duckdb` ->
`warehouse/.writer/`): the same file system, so the rename never crosses devices, and where it
can share blocks (XFS, btrfs) the copy is one. Elsewhere the cost is one copy of the file per
writing step (disk: twice the file while a step runs): affordable because the file holds facts
and no copy of the readings (those are Parquet files in `<db stem>/readings/`: warehouse/readings.py).
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from joulehouse.collectors.lakefs import write_file_atomically
from joulehouse.warehouse.db import WarehouseError, connect

WRITER_FOLDER = ".writer"
LOCK_NAME = "lock"
LOCK_POLL_S = 0.2
log = logging.getLogger(__name__)


def home_folder(db_file: str | Path) -> Path:
    """The folder beside the published file that holds the warehouse's own files (`warehouse.duckdb`
    -> `warehouse/`), named the same from a writer's copy of the file inside its `.writer/`."""
    path = Path(db_file).expanduser().resolve()
    if path.parent.name == WRITER_FOLDER:
        return path.parent.parent
    return path.with_suffix("")


OWNER_NAME = ".owner"


def _refuse_without_extension(db_path: Path) -> None:
    """A file with no extension has itself for a home and could never be published."""
    if home_folder(db_path) == db_path:
        raise WarehouseError(f"warehouse {db_path}: give the file an extension (warehouse.duckdb): its readings and "
                             f"its writer's copies live in a folder named like it without one")


def _claim_home(db_path: Path) -> None:
    """Refuse a warehouse file whose home folder is not its own: `wh.duckdb` and a copy `wh.bak`
    share `wh/`, and a build of the copy deleted the readings of the other as not its own. The
    first writer notes its file's name in the folder. Called under the writer lock, which the two
    files share (it lives in the folder): a copy's build that waited and gave up had already named
    itself the owner. The note is written whole or not at all (a writer killed between creating it
    and writing it left an empty note that refused every later build), and an empty one is no claim."""
    home = home_folder(db_path)
    owner = home / OWNER_NAME
    home.mkdir(parents=True, exist_ok=True)
    try:
        named = owner.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        named = ""
    if not named:
        write_file_atomically(owner, (db_path.name + "\n").encode("utf-8"), 0o644)
        return
    if named != db_path.name:
        raise WarehouseError(f"warehouse {db_path}: the folder {home} beside it holds the readings of {named}; two "
                             "warehouse files named alike but for their extension cannot share it (rename one; or, if this file "
                             f"is that one renamed, delete {owner})")


def writer_folder(db_path: str | Path) -> Path:
    """Where the writer lock and the copies being written live: `<db stem>/.writer/`."""
    return home_folder(db_path) / WRITER_FOLDER


@contextmanager
def writer_lock(db_path: str | Path, wait_s: float = 3600.0) -> Iterator[None]:
    """Hold the warehouse's writer lock; waits up to `wait_s` for another writer to finish, then
    raises WarehouseError naming the holder (pid and since when, as it wrote them)."""
    folder = writer_folder(db_path)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_NAME, "a+", encoding="utf-8") as lock:
        deadline, waited = time.monotonic() + wait_s, False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited:
                    log.info("warehouse %s: waiting for another writer (%s)", db_path, _holder(lock))
                    waited = True
                if time.monotonic() >= deadline:
                    raise WarehouseError(f"warehouse {db_path}: another writer holds {folder / LOCK_NAME} "
                                         f"({_holder(lock)}) for over {wait_s:g} s") from None
                time.sleep(LOCK_POLL_S)
        try:
            lock.seek(0)
            lock.truncate()
            lock.write(f"pid {os.getpid()} since {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
            lock.flush()
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _holder(lock) -> str:
    lock.seek(0)
    return lock.read().strip() or "holder unknown"


@contextmanager
def published_connection(db_path: str | Path, lake: str | Path | None, *,
                         publish_on: tuple[type[BaseException], ...] = (),
                         wait_s: float = 3600.0, **connect_options) -> Iterator[duckdb.DuckDBPyConnection]:
    """A writable connection to a copy of the warehouse at `db_path`, published over it by an
    atomic rename when the block ends without an error (or with one of `publish_on`)."""
    db_path = Path(db_path).expanduser().resolve()
    _refuse_without_extension(db_path)
    with writer_lock(db_path, wait_s):
        _claim_home(db_path)
        _remove_dead_writers_copies(db_path)
        copy = writer_folder(db_path) / f"{db_path.stem}-{os.getpid()}-{uuid.uuid4().hex[:8]}{db_path.suffix}"
        try:
            leftover_wal = Path(f"{db_path}.wal")
            if db_path.exists():
                copy_file(db_path, copy)
                if leftover_wal.exists():
                    # committed work of a writer that opened the file in place and died: replayed
                    # into the copy when it opens, never by opening the published file writable
                    # (a reader holding it read-only made that open, and the run, fail)
                    copy_file(leftover_wal, Path(f"{copy}.wal"))
            con = connect(copy, lake, **connect_options)
            publish = False
            try:
                yield con
                publish = True
            except publish_on:
                publish = True
                raise
            finally:
                con.close()
                if publish:
                    _publish(copy, db_path)
        finally:
            for leftover in (copy, Path(f"{copy}.wal")):
                leftover.unlink(missing_ok=True)


def _remove_dead_writers_copies(db_path: Path) -> None:
    """Delete the copies (and their WALs) a writer left when it was killed: a copy is made and
    removed under the lock, so any the lock's new holder finds belongs to a writer that died. Each
    is the warehouse's size: a writer OOM-killed every night would otherwise fill the disk."""
    folder = writer_folder(db_path)
    for pattern in (f"{db_path.stem}-*{db_path.suffix}", f"{db_path.stem}-*{db_path.suffix}.wal",
                    f"{db_path.stem}-*{db_path.suffix}.tmp"):  # .tmp: DuckDB's spill folder beside its file
        for leftover in folder.glob(pattern):
            log.info("warehouse %s: removing %s, left by a writer that died", db_path, leftover.name)
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                leftover.unlink(missing_ok=True)


def copy_file(source: Path, target: Path) -> None:
    """Copy `source` to `target` with copy_file_range, which shares the blocks instead of copying
    them where the file system can (XFS, btrfs: a copy of any size in milliseconds) and copies in
    the kernel elsewhere; shutil's copy where the call is not supported."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        left = os.fstat(src.fileno()).st_size
        try:
            while left > 0:
                copied = os.copy_file_range(src.fileno(), dst.fileno(), left)
                if copied == 0:
                    break
                left -= copied
        except OSError:
            left = -1
    if left != 0:
        shutil.copyfile(source, target)


def _publish(copy: Path, db_path: Path) -> None:
    if Path(f"{copy}.wal").exists():
        raise WarehouseError(f"warehouse copy {copy} kept its WAL after closing; not published over {db_path}")
    with open(copy, "rb") as written:
        os.fsync(written.fileno())
    # A WAL beside the published file (a writer that opened it in place and died) was replayed into
    # the copy; it is removed before the rename, not after: left beside the new file by a crash
    # between the two, DuckDB refused to open the warehouse ("WAL checkpoint iteration does not
    # match") until someone deleted it. A crash between these two lines loses that writer's
    # uncheckpointed rows instead, which only a read-write open of the published file can make.
    Path(f"{db_path}.wal").unlink(missing_ok=True)
    os.replace(copy, db_path)
    directory = os.open(db_path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)  # the rename itself survives a crash
    finally:
        os.close(directory)
