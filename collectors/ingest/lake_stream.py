"""Landing an imported log in the lake chunk by chunk: an import holds a chunk of rows, not the log.

A month of `nvidia-smi -l 1` of 8 GPUs is ~20 M rows, ~20 GB as parsed Python values. `LogLanding`
takes them in chunks, with the files, ledger, quarantine and replacement of an earlier import that
lake_import's module docstring describes (`land_log`: a log's rows given whole, the Slurm import's
one chunk):
- each chunk's rows of a (day, host) partition are appended to a staged file of that partition,
  one row group per chunk, sorted by GPU then time, written with the lake writer's settings
  (collectors/writer.py); the rejected rows are appended to a staged quarantine file. Staged
  files live in `<lake>/.import-staging/<log id>-<random>/` (a hidden folder: no reader's glob and
  not ship lists it), or in a local temporary folder for an object-store lake;
- `finish` then lists the old and the new days in the ledger, moves
  each staged file into its partition under the log's one name (a rename in the lake's
  filesystem, atomic; one PUT to an object store), withdraws the days the log no longer covers,
  takes the log's rows out of compacted files, lists the new days and puts the quarantine in
  place. Before `finish` nothing of the import is visible, so a log refused half-way (a quote
  never closed, GPUs that cannot be told apart) leaves the lake as it was: `abort` removes the
  staged files.
- at most MAX_OPEN_PARTITIONS staged files are open at once (a log in time order needs one or
  two): a partition whose file was closed and gets rows again starts a second segment, and
  `finish` copies the segments into one file a row group at a time.
A crash during an import leaves its staging folder behind (nothing in the lake refers to it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import DATASETS, conform
from joulehouse.collectors.ingest.lake_import import (LOG_ID_COLUMN, LandedLog, RejectedRow, in_partition,
                                                      ledger_fields, ledger_partitions, log_id, read_json, remove_file,
                                                      remove_withdrawal_note, safe_stem, split_partitions, take_out,
                                                      withdraw_file, withdrawal_note, write_json)
from joulehouse.collectors.writer import (ROW_GROUP_ROWS, LakeWriteError, WrittenFile, parquet_options,
                                          _open_partition_folder, check_host_name,
                                          partition_dir)

STAGING_DIR = ".import-staging"
# Rejected rows an import keeps in memory beside the first of each reason kind (the quarantine
# file has them all): a log of 20 M rows rejected whole held them all.
KEPT_REJECTS = 1000
# Each open staged file holds a file descriptor and its writer's state; a log in time order
# writes to one partition, two across midnight.
MAX_OPEN_PARTITIONS = 4

_Key = tuple[str, str]  # (UTC day, host) of a partition


class LogLanding:
    """One import of the log at `path` from `host` into `lake`'s `dataset`: `add` its rows in
    chunks and `reject` its bad lines as they come, then `finish` (or `abort`). As a context
    manager it aborts when the block raises and `finish` was not reached."""

    def __init__(self, lake: str | Path, *, source: str, host: str, path: str | Path,
                 dataset: str = "gpu_samples") -> None:
        check_host_name(host)  # refused before anything is made
        self.lake, self.source, self.host, self.path, self.dataset = lakefs.lake_root(lake), source, host, path, dataset
        self.identity = log_id(source, host, path)
        self.name = f"part-{source}-{safe_stem(Path(path).stem)}-{self.identity}.parquet"
        self._staging: Path | None = None
        self._segments: dict[_Key, list[Path]] = {}
        self._rows: dict[_Key, int] = {}
        self._open: OrderedDict[_Key, tuple[IO[bytes], pq.ParquetWriter]] = OrderedDict()
        self._quarantine: IO[bytes] | None = None
        self.good_rows, self.rejected_rows = 0, 0
        self.rejected: list[RejectedRow] = []  # the first KEPT_REJECTS, and the first of each kind
        self.reasons: dict[str, int] = {}  # rejected rows per reason kind (the text before the first colon)

    def __enter__(self) -> LogLanding:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abort()

    def add(self, table: pa.Table) -> None:
        """Stage the rows of `table` (the dataset's conformed columns), each in its partition."""
        if not table.num_rows:
            return
        table = table.append_column(LOG_ID_COLUMN, pa.array([self.identity] * table.num_rows, pa.string()))
        for key, part in split_partitions(table, self.dataset, self.host).items():
            self._writer(key, part.schema).write_table(part, row_group_size=ROW_GROUP_ROWS)
            self._rows[key] = self._rows.get(key, 0) + part.num_rows
        self.good_rows += table.num_rows

    def reject(self, row: RejectedRow) -> None:
        """Stage one rejected line of the log for the quarantine file."""
        if self._quarantine is None:
            self._quarantine = open(self._staged("quarantine.jsonl.tmp"), "wb")
        self._quarantine.write((json.dumps({"source_file": str(self.path), "host": self.host, "line": row.line,
                                            "reason": row.reason, "text": row.text}) + "\n").encode())
        self.rejected_rows += 1
        kind = row.reason.split(":", 1)[0]
        if len(self.rejected) < KEPT_REJECTS or kind not in self.reasons:
            self.rejected.append(row)
        self.reasons[kind] = self.reasons.get(kind, 0) + 1

    def finish(self) -> LandedLog:
        """Put the staged files in place, replacing what an earlier import of the log wrote."""
        for key in list(self._open):
            self._close(key)
        lake, folder = self.lake, self.source.replace("-", "_")
        ledger = lakefs.join(lake, "_imports", folder, f"{self.identity}.json")
        old = ledger_partitions(read_json(ledger), self.host)
        new = set(self._segments)
        targets = {key: in_partition(lake, self.dataset, *key, self.name) for key in sorted(new)}
        record = {"source": self.source, "host": self.host, "path": str(Path(self.path).expanduser().resolve()),
                  "dataset": self.dataset}
        write_json(ledger, {**record, **ledger_fields(old | new, self.host)})
        written = []
        for key, target in targets.items():
            written.append(self._place(key, target))
            # after the file is in place: a crash before it keeps the note, and ship withdraws nothing
            # while the file is in the lake
            remove_withdrawal_note(withdrawal_note(lake, target))
        rewritten = []
        for day, part_host in sorted(old | new):
            if (day, part_host) not in new:
                withdraw_file(lake, in_partition(lake, self.dataset, day, part_host, self.name), self.identity)
            if isinstance(lake, Path):
                rewritten += take_out(Path(partition_dir(lake, self.dataset, day, part_host)), self.identity,
                                       keep=self.name)
        write_json(ledger, {**record, **ledger_fields(new, self.host)})
        quarantine = lakefs.join(lake, "_quarantine", folder, f"{safe_stem(Path(self.path).stem)}-{self.identity}.jsonl")
        if self._quarantine is not None:
            self._put(_synced(self._quarantine), quarantine, partition=False)
            self._quarantine = None
        else:
            remove_file(quarantine)  # an earlier import's rejects no longer apply
        self.abort()  # the staging folder, now empty of anything that matters
        return LandedLog(self.identity, written, rewritten, quarantine if self.rejected_rows else None, len(old))

    def abort(self) -> None:
        """Drop every staged file: the lake keeps what it had before this import."""
        for fh, writer in self._open.values():
            # the file is dropped whatever its writer says (a full disk): the import's own error stands
            with contextlib.suppress(Exception):
                writer.close()
            fh.close()
        self._open.clear()
        if self._quarantine is not None:
            self._quarantine.close()
            self._quarantine = None
        if self._staging is not None:
            shutil.rmtree(self._staging, ignore_errors=True)
            if isinstance(self.lake, Path):  # the shared folder too, once no other import stages in it
                with contextlib.suppress(OSError):
                    (self.lake / STAGING_DIR).rmdir()
            self._staging = None

    def _staged(self, name: str) -> Path:
        if self._staging is None:
            if isinstance(self.lake, Path):
                root = self.lake / STAGING_DIR
                root.mkdir(parents=True, exist_ok=True)
                self._staging = Path(tempfile.mkdtemp(prefix=f"{self.identity}-", dir=root))
            else:
                self._staging = Path(tempfile.mkdtemp(prefix="jh-import-"))
        return self._staging / name

    def _writer(self, key: _Key, schema: pa.Schema) -> pq.ParquetWriter:
        if key in self._open:
            self._open.move_to_end(key)
            return self._open[key][1]
        if len(self._open) >= MAX_OPEN_PARTITIONS:
            self._close(next(iter(self._open)))
        segment = self._staged(f"{uuid.uuid4().hex[:12]}.parquet.tmp")
        self._segments.setdefault(key, []).append(segment)
        fh = open(segment, "wb")
        self._open[key] = (fh, _parquet_writer(fh, schema))
        return self._open[key][1]

    def _close(self, key: _Key) -> None:
        fh, writer = self._open.pop(key)
        writer.close()
        _synced(fh)

    def _place(self, key: _Key, target: Path | str) -> WrittenFile:
        """The partition's staged segments, as one file, at `target`."""
        segments = self._segments[key]
        staged = segments[0] if len(segments) == 1 else self._merged(segments)
        size = staged.stat().st_size
        self._put(staged, target, partition=True)
        return WrittenFile(path=target, rows=self._rows[key], bytes=size)

    def _merged(self, segments: list[Path]) -> Path:
        """One staged file of `segments`, copied a row group at a time."""
        merged = self._staged(f"{uuid.uuid4().hex[:12]}.parquet.tmp")
        with open(merged, "wb") as fh:
            writer = _parquet_writer(fh, pq.read_schema(segments[0]))
            for segment in segments:
                source = pq.ParquetFile(segment)
                for group in range(source.num_row_groups):
                    writer.write_table(source.read_row_group(group), row_group_size=ROW_GROUP_ROWS)
                source.close()
                segment.unlink()
            writer.close()
            fh.flush()
            os.fsync(fh.fileno())
        return merged

    def _put(self, staged: Path, target: Path | str, *, partition: bool) -> None:
        """Move the finished staged file to `target`: renamed into its folder (a `partition` folder
        opened as the lake writer opens one, following no link); one upload to an object store."""
        if isinstance(target, str):
            try:
                lakefs.filesystem(target).put_file(str(staged), target)
            except OSError as exc:
                raise LakeWriteError(exc.errno, f"cannot upload lake file {target}: {exc}") from exc
            return
        folder_fd = None
        try:
            if partition:
                folder_fd = _open_partition_folder(target.parent)
            else:  # _quarantine/<source>/, as land_log writes it
                lakefs.makedirs_durably(target.parent)
                folder_fd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            os.replace(staged, target.name, dst_dir_fd=folder_fd)
            os.fsync(folder_fd)
        except OSError as exc:
            raise LakeWriteError(exc.errno, f"cannot write lake file {target}: {exc.strerror or exc}") from exc
        finally:
            if folder_fd is not None:
                os.close(folder_fd)


def land_log(lake: str | Path, table: pa.Table, rejected: list[RejectedRow], *, source: str, host: str,
             path: str | Path, dataset: str = "gpu_samples") -> LandedLog:
    """Write an imported log's `dataset` rows `table` and its `rejected` lines into `lake` in one
    chunk, replacing what an earlier import of the same log wrote (lake_import's module
    docstring). `host` is the log's origin (its identity); rows land under host=`host`, or, for a
    log covering many hosts (a scheduler's accounting: `jobs`), under each row's own host column."""
    with LogLanding(lake, source=source, host=host, path=path, dataset=dataset) as landing:
        landing.add(table)
        for row in rejected:
            landing.reject(row)
        return landing.finish()


class LandedImport:
    """What a streamed import landed, read as an import's result is (nvidia_smi.IngestResult):
    `good_rows`, `bad_rows` and `reasons()` were counted as the rows went by; `rejected` holds the
    first KEPT_REJECTS and the first of each reason kind (the quarantine file has all); `table`
    reads the rows back from the files written, in the lake's order (by GPU, then time), only when
    asked. `written`, `rewritten` and `quarantine_path` are set by lake_import.record_landing."""

    def __init__(self, path: Path, landing: LogLanding, notes: list[str]) -> None:
        self.path, self.notes, self.dataset = path, notes, landing.dataset
        self.good_rows, self.bad_rows = landing.good_rows, landing.rejected_rows
        self.rejected, self._reasons = landing.rejected, dict(landing.reasons)
        self.written: list[WrittenFile] = []
        self.rewritten: list[Path] = []
        self.quarantine_path: Path | str | None = None
        self._table: pa.Table | None = None

    def __repr__(self) -> str:
        return f"LandedImport({str(self.path)!r}: {self.good_rows} rows in {len(self.written)} files, {self.bad_rows} rejected)"

    def reasons(self) -> dict[str, int]:
        """Rejected-row count per reason kind (the text before the first colon)."""
        return dict(self._reasons)

    @property
    def table(self) -> pa.Table:
        if self._table is None:
            parts = [_read_lake_file(w.path).drop_columns([LOG_ID_COLUMN]) for w in self.written]
            self._table = pa.concat_tables(parts) if parts else conform(self.dataset, DATASETS[self.dataset].empty_table())
        return self._table


def _read_lake_file(path: Path | str) -> pa.Table:
    if isinstance(path, Path):
        return pq.read_table(path)
    with lakefs.filesystem(path).open(path.split("://", 1)[1], "rb") as fh:
        return pq.read_table(fh)


def _parquet_writer(fh: IO[bytes], schema: pa.Schema) -> pq.ParquetWriter:
    """A writer of one lake file with the lake writer's settings (collectors/writer.py)."""
    return pq.ParquetWriter(fh, schema, **parquet_options(schema))


def _synced(fh: IO[bytes]) -> Path:
    """Flush, fsync and close a staged file; its path (a rename then publishes whole bytes)."""
    fh.flush()
    os.fsync(fh.fileno())
    fh.close()
    return Path(fh.name)
