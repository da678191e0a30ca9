"""Immutable, atomically written Parquet files in the Hive-partitioned lake.

Layout: `<lake>/<dataset>/date=YYYY-MM-DD/host=<host>/part-<first-ts>-<id>.parquet`.
A file is written under a temporary name that no reader's `*.parquet` glob matches, flushed to
disk (fsync), then renamed: a reader sees a whole file or no file. The directory is fsynced
after the rename so the new name survives a power cut.

The lake may also be an fsspec URL (`s3://bucket/lake`, see collectors.lakefs): the file is then
written to a local temporary file and uploaded to its final key in one PUT (multipart above
s3fs's part size, completed at once), which an object store makes visible whole or not at all.

Parquet settings are chosen for telemetry: zstd (level 3: higher levels gain < 1% here), rows
sorted by GPU then time, delta encoding for timestamps, counters and slowly moving integers,
byte-stream-split for floats and for integer rates that jump (PCIe), dictionaries only for the
low-cardinality strings (host, uuid, model, source), one data page per column per row group of
up to 1 Mi rows. What each column keeps is in collectors/schema.py.
"""

from __future__ import annotations

import datetime as dt
import errno
import logging
import os
import posixpath
import re
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import PARTITION_HOST_COLUMN, SORT_KEYS, TIME_COLUMN, conform

TMP_SUFFIX = ".parquet.tmp"
ROW_GROUP_ROWS = 1_048_576
# One data page per column per row group (Arrow's defaults cut a page every 20,000 rows or 1 MiB):
# byte-stream-split and delta streams compress ~20% smaller in one long page than in 35 short
# ones (measured on a simulated fleet-day, bench/collector.py). Readers lose nothing: the lake is
# read by whole days, and a row group is already the unit DuckDB scans and prunes by.
PAGE_BYTES = 8 * 1_048_576  # an int64 column of a full row group
US_PER_DAY = 86_400_000_000
EPOCH = dt.date(1970, 1, 1)

log = logging.getLogger(__name__)


class LakeWriteError(OSError):
    """Writing a lake file failed; the message names the file and the cause (disk full...)."""


@dataclass(frozen=True)
class WrittenFile:
    path: Path | str  # a local Path, or the object's URL for an object-store lake
    rows: int
    bytes: int


# Integer rates that jump from one sample to the next: a delta is as wide as the value, so
# DELTA_BINARY_PACKED saves nothing, while byte-stream-split hands zstd the near-constant high
# bytes (and, at NVML's KiB/s resolution, the all-zero low byte) as runs of their own.
BYTE_STREAM_SPLIT_INTEGERS = frozenset({"pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"})


def _encodings(schema: pa.Schema) -> tuple[list[str], dict[str, str]]:
    dictionary, encoding = [], {}
    for f in schema:
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            dictionary.append(f.name)
        elif f.name in BYTE_STREAM_SPLIT_INTEGERS and pa.types.is_integer(f.type):
            encoding[f.name] = "BYTE_STREAM_SPLIT"
        elif pa.types.is_timestamp(f.type) or pa.types.is_integer(f.type):
            encoding[f.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(f.type):
            encoding[f.name] = "BYTE_STREAM_SPLIT"
    return dictionary, encoding


def parquet_options(schema: pa.Schema) -> dict:
    """The lake's Parquet settings for a file of `schema`: pq.write_table and pq.ParquetWriter
    (an import landing a log chunk by chunk) take them alike, so every lake file is written one way."""
    dictionary, encoding = _encodings(schema)
    return dict(compression="zstd", compression_level=3, version="2.6", data_page_version="2.0",
                use_dictionary=dictionary, column_encoding=encoding, data_page_size=PAGE_BYTES,
                max_rows_per_page=ROW_GROUP_ROWS, write_statistics=True)


def _write_parquet(table: pa.Table, fh) -> None:
    pq.write_table(table, fh, row_group_size=ROW_GROUP_ROWS, **parquet_options(table.schema))


def write_parquet_atomic(table: pa.Table, path: Path) -> WrittenFile:
    """Write `table` to `path` atomically (temporary name, fsync, rename, fsync the folder; new
    partition folders fsynced into their parents). The partition folders below the lake
    (<lake>/<dataset>/date=/host=) are opened without following links: the node agent writes its
    audit as root into a lake the collector's user owns, and a link planted there would otherwise
    have root write wherever it points."""
    tmp_name = f".{path.stem}-{uuid.uuid4().hex[:8]}{TMP_SUFFIX}"
    folder_fd = None
    try:
        folder_fd = _open_partition_folder(path.parent)  # a read-only lake fails here: a LakeWriteError like any other
        fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                     dir_fd=folder_fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                _write_parquet(table, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp_name, path.name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
            os.fsync(folder_fd)
        except BaseException:
            _unlink_quietly(tmp_name, folder_fd)
            raise
    except OSError as exc:
        reason = ("a partition folder is a symbolic link; the lake's partition folders must be real folders"
                  if exc.errno in (errno.ELOOP, errno.ENOTDIR) else exc.strerror or str(exc))
        raise LakeWriteError(exc.errno, f"cannot write lake file {path}: {reason}") from exc
    finally:
        if folder_fd is not None:
            os.close(folder_fd)
    return WrittenFile(path=path, rows=table.num_rows, bytes=path.stat().st_size)


# <dataset>/date=YYYY-MM-DD/host=<host>: the folders below the lake's root, opened without links
_PARTITION_DEPTH = 3


def _open_partition_folder(folder: Path) -> int:
    """A descriptor of `folder`, its last _PARTITION_DEPTH components opened (or created and
    fsynced into their parents) one at a time with O_NOFOLLOW, from the lake's root (which may be a
    link: an operator's choice, not something a writer of the lake can plant)."""
    parts = folder.parts[-_PARTITION_DEPTH:]
    root = Path(*folder.parts[:-_PARTITION_DEPTH]) if len(folder.parts) > _PARTITION_DEPTH else Path(".")
    lakefs.makedirs_durably(root)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for name in parts:
            try:
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(name, dir_fd=fd)
                except FileExistsError:
                    pass  # another writer made it
                os.fsync(fd)
                child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _unlink_quietly(name: str, dir_fd: int) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write `data` to `path` so that a reader sees the old file or the whole new one (mode 0644:
    exports are served to the nodes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lakefs.write_file_atomically(path, data, 0o644)


def write_parquet_object(table: pa.Table, url: str) -> WrittenFile:
    """Write `table` to the object `url` (fsspec): a local temporary file, then one upload to
    the final key, so no reader ever lists a partial object."""
    fs = lakefs.filesystem(url)
    with tempfile.TemporaryDirectory(prefix="jh-upload-") as scratch:
        tmp = Path(scratch) / "part.parquet"
        with open(tmp, "wb") as fh:
            _write_parquet(table, fh)
        size = tmp.stat().st_size
        try:
            fs.put_file(str(tmp), url)
        except OSError as exc:
            raise LakeWriteError(exc.errno, f"cannot upload lake file {url}: {exc}") from exc
    return WrittenFile(path=url, rows=table.num_rows, bytes=size)


# A host name as DNS, Slurm and Kubernetes spell one (plus '_'): it names a folder of the lake and
# reaches the scheduler lines of infra/placement, so '/', '..', '=', spaces, quotes or shell
# characters never get into either.
# At most 250: the folder is "host=<name>", and a file system's name holds 255 bytes.
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,249}")


def check_host_name(host: str) -> str:
    """`host` if it can name a lake partition; else ValueError naming it."""
    if not isinstance(host, str) or not _HOST_NAME.fullmatch(host):
        raise ValueError(f"host {host!r} cannot name a partition folder: expected a host name (letters, digits, "
                         "'.', '-', '_', starting with a letter or digit, at most 250 characters)")
    return host


def partition_dir(lake: str | Path, dataset: str, date: str, host: str) -> Path | str:
    """The folder of one (dataset, date, host) partition (a URL string for an object-store lake)."""
    return lakefs.join(lake, dataset, f"date={date}", f"host={check_host_name(host)}")


def partition_files(lake: str | Path, dataset: str, date: str, host: str) -> list[Path | str]:
    """The finished `*.parquet` files of one partition, sorted (URLs for an object-store lake)."""
    folder = partition_dir(lake, dataset, date, host)
    if isinstance(folder, Path):
        return sorted(folder.glob("*.parquet")) if folder.exists() else []
    found = lakefs.filesystem(folder).glob(folder.split("://", 1)[1] + "/*.parquet")
    names = (posixpath.basename(p) for p in found)
    return sorted(f"{folder}/{name}" for name in names if not name.startswith("."))


def write_lake_file(table: pa.Table, target: Path | str) -> WrittenFile:
    """Write one lake file: atomically renamed on a local Path, one upload to a URL."""
    if isinstance(target, Path):
        return write_parquet_atomic(table, target)
    return write_parquet_object(table, target)


def _split_by_partition(dataset: str, table: pa.Table) -> Iterator[tuple[str, str, pa.Table]]:
    # Integer days since the epoch (UTC): formatting a date string per row cost ~1 us a row.
    micros = table.column(TIME_COLUMN[dataset]).cast(pa.int64())
    days = pc.divide(micros, pa.scalar(US_PER_DAY, pa.int64()))
    # Integer division truncates toward zero; shift negative (pre-1970) times down a day.
    days = pc.if_else(pc.less(micros, 0), pc.subtract(days, 1), days)
    host_col = PARTITION_HOST_COLUMN[dataset]
    keyed = pa.table({"__day": days, host_col: table.column(host_col)})
    groups = keyed.group_by(["__day", host_col], use_threads=False).aggregate([])
    for day, host in zip(groups.column("__day").to_pylist(), groups.column(host_col).to_pylist()):
        mask = pc.and_(pc.equal(keyed.column("__day"), day), pc.equal(keyed.column(host_col), host))
        date = (EPOCH + dt.timedelta(days=day)).isoformat()
        yield date, host, table.filter(mask)


def lake_file_name(dataset: str, table: pa.Table) -> str:
    """A new file's name: its first reading's time (microseconds since the epoch, so names sort
    by time) and a random part, so two writers never pick the same name."""
    first = pc.min(table.column(TIME_COLUMN[dataset])).value
    return f"part-{first:016d}-{uuid.uuid4().hex[:12]}.parquet"


def write_dataset(lake: str | Path, dataset: str, table: pa.Table) -> list[WrittenFile]:
    """Conform `table` to `dataset`'s schema, split it by (UTC date, host) and write one sorted,
    immutable file per partition. Returns what was written."""
    if table.num_rows == 0:
        return []
    table = conform(dataset, table)
    written = []
    for date, host, part in _split_by_partition(dataset, table):
        part = part.sort_by(SORT_KEYS[dataset])
        name = lake_file_name(dataset, part)
        folder = partition_dir(lake, dataset, date, host)
        target = folder / name if isinstance(folder, Path) else f"{folder}/{name}"
        written.append(write_lake_file(part, target))
    return written


def replace_partition(lake: str | Path, dataset: str, date: str, host: str, table: pa.Table) -> list[WrittenFile]:
    """Write `table` as the whole content of one partition, removing the files it had before
    (the new file lands first, so a reader sees old or new rows, never neither)."""
    old = partition_files(lake, dataset, date, host)
    written = write_dataset(lake, dataset, table)
    for f in old:
        if isinstance(f, Path):
            f.unlink()
        else:
            lakefs.filesystem(f).rm_file(f)
    return written


# A lake file's temporary name older than this is a killed writer's: its rows are still in the
# spool segment it came from (or the import that wrote it is redone), and a live write renames its
# file within seconds. An ingest or compaction may run beside the collector: theirs are young.
ORPHAN_TMP_AGE_S = 3600
ORPHAN_TMP_DAYS = 7


def remove_orphan_temporaries(lake: Path, now_s: float | None = None) -> list[Path]:
    """Remove the lake's hidden `.*.parquet.tmp` files older than ORPHAN_TMP_AGE_S: a SIGKILL between
    a lake file's write and its rename left one per kill, never removed (an OOM-killed collector
    rolling 500k-row segments filled the disk it shares with the spool)."""
    now_s = time.time() if now_s is None else now_s
    removed: list[Path] = []
    if not Path(lake).is_dir():  # a first start: no lake yet
        return removed
    # the newest days only: a writer writes the days it is collecting, and a start must not walk
    # every partition of a year-old lake (ISO date folder names sort as the days do)
    recent = [day for dataset in Path(lake).iterdir() if dataset.is_dir()
              for day in sorted(dataset.glob("date=*"))[-ORPHAN_TMP_DAYS:]]
    for tmp in (t for day in recent for t in day.glob(f"host=*/.*{TMP_SUFFIX}")):
        try:
            if now_s - tmp.lstat().st_mtime > ORPHAN_TMP_AGE_S:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            continue  # gone meanwhile, or not ours to remove: the next start looks again
    if removed:
        log.info("lake %s: removed %d temporary file(s) writers killed mid-write left", lake, len(removed))
    return removed
