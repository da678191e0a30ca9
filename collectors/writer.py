"""Immutable, atomically written Parquet files in the Hive-partitioned lake.

Layout: `<lake>/<dataset>/date=YYYY-MM-DD/host=<host>/part-<first-ts>-<id>.parquet`.
A file is written under a temporary name that no reader's `*.parquet` glob matches, flushed to
disk (fsync), then renamed: a reader sees a whole file or no file. The directory is fsynced
after the rename so the new name survives a power cut.

Parquet settings are chosen for telemetry: zstd, rows sorted by GPU then time, delta encoding
for timestamps and integer counters, byte-stream-split for floats, dictionaries only for the
low-cardinality strings (host, uuid, model, source).
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from collectors.schema import PARTITION_HOST_COLUMN, SORT_KEYS, TIME_COLUMN, conform

TMP_SUFFIX = ".parquet.tmp"
ROW_GROUP_ROWS = 1_048_576
US_PER_DAY = 86_400_000_000
EPOCH = dt.date(1970, 1, 1)


class LakeWriteError(OSError):
    """Writing a lake file failed; the message names the file and the cause (disk full...)."""


@dataclass(frozen=True)
class WrittenFile:
    path: Path
    rows: int
    bytes: int


def _encodings(schema: pa.Schema) -> tuple[list[str], dict[str, str]]:
    dictionary, encoding = [], {}
    for f in schema:
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type):
            dictionary.append(f.name)
        elif pa.types.is_timestamp(f.type) or pa.types.is_integer(f.type):
            encoding[f.name] = "DELTA_BINARY_PACKED"
        elif pa.types.is_floating(f.type):
            encoding[f.name] = "BYTE_STREAM_SPLIT"
    return dictionary, encoding


def write_parquet_atomic(table: pa.Table, path: Path) -> WrittenFile:
    """Write `table` to `path` atomically (temporary name, fsync, rename, fsync the folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}-{uuid.uuid4().hex[:8]}{TMP_SUFFIX}")
    dictionary, encoding = _encodings(table.schema)
    try:
        with open(tmp, "wb") as fh:
            pq.write_table(
                table,
                fh,
                compression="zstd",
                compression_level=3,
                version="2.6",
                data_page_version="2.0",
                use_dictionary=dictionary,
                column_encoding=encoding,
                row_group_size=ROW_GROUP_ROWS,
                write_statistics=True,
            )
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise LakeWriteError(exc.errno, f"cannot write lake file {path}: {exc.strerror or exc}") from exc
    return WrittenFile(path=path, rows=table.num_rows, bytes=path.stat().st_size)


def partition_dir(lake: Path, dataset: str, date: str, host: str) -> Path:
    """The folder of one (dataset, date, host) partition."""
    if "/" in host or host in ("", ".", ".."):
        raise ValueError(f"host {host!r} cannot name a partition folder")
    return Path(lake) / dataset / f"date={date}" / f"host={host}"


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


def write_dataset(lake: str | Path, dataset: str, table: pa.Table) -> list[WrittenFile]:
    """Conform `table` to `dataset`'s schema, split it by (UTC date, host) and write one sorted,
    immutable file per partition. Returns what was written."""
    if table.num_rows == 0:
        return []
    table = conform(dataset, table)
    written = []
    for date, host, part in _split_by_partition(dataset, table):
        part = part.sort_by(SORT_KEYS[dataset])
        first = part.column(TIME_COLUMN[dataset])[0].value  # microseconds since epoch
        name = f"part-{first:016d}-{uuid.uuid4().hex[:12]}.parquet"
        written.append(write_parquet_atomic(part, partition_dir(Path(lake), dataset, date, host) / name))
    return written


def replace_partition(lake: str | Path, dataset: str, date: str, host: str, table: pa.Table) -> list[WrittenFile]:
    """Write `table` as the whole content of one partition, removing the files it had before
    (the new file lands first, so a reader sees old or new rows, never neither)."""
    folder = partition_dir(Path(lake), dataset, date, host)
    old = sorted(folder.glob("*.parquet")) if folder.exists() else []
    written = write_dataset(lake, dataset, table)
    for f in old:
        f.unlink()
    return written
