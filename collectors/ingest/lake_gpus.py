"""What the lake already knows about a host's GPUs, for placing a scheduler's jobs on them.

- `gpus_of(host, days)`: the GPUs (index, UUID) the host's gpu_samples show on those UTC days,
  read from two columns of each partition's files (their footers and one column chunk each).
- `job_gpus(host, days, job_id)`: the GPUs the collector's process map (`gpu_processes`) saw a
  process of that Slurm job on, those days.
- `placed_gpus(host, day, job_id, started_at)`: the GPUs (and the rule of each) an earlier import
  placed that holding on, from the lake's `jobs` rows: a job in two overlapping exports (a daily
  `sacct -S <day>` of a job across midnight) keeps its GPUs, where each export's own order had put
  it on other GPUs and both copies were counted.

Both are cached per partition: a sacct export of a thousand jobs on one node reads its partition
once.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.writer import partition_files


class LakeGpus:
    """The GPU inventory and process map of the lake at `lake` (a folder or fsspec URL)."""

    def __init__(self, lake: str | Path):
        self.lake = lakefs.lake_root(lake)
        self._cache: dict[tuple[str, str, str], pa.Table] = {}
        self._gpus: dict[tuple[str, tuple[str, ...]], list[tuple[int, str]]] = {}

    def _partition(self, dataset: str, day: str, host: str, columns: list[str]) -> pa.Table:
        key = (dataset, day, host)
        if key not in self._cache:
            parts = []
            for path in partition_files(self.lake, dataset, day, host):
                parts.append(read_columns(path, columns))
            self._cache[key] = pa.concat_tables(parts, promote_options="permissive") if parts else pa.table(
                {c: pa.array([], pa.string()) for c in columns})
        return self._cache[key]

    def gpus_of(self, host: str, days: Iterable[str]) -> list[tuple[int, str]]:
        """(gpu_index, gpu_uuid) of every GPU `host` reported on `days`, by index."""
        key = (host, tuple(days))
        if key not in self._gpus:
            self._gpus[key] = self._gpus_of(host, key[1])
        return self._gpus[key]

    def _gpus_of(self, host: str, days: tuple[str, ...]) -> list[tuple[int, str]]:
        found: dict[str, int] = {}
        for day in days:
            table = self._partition("gpu_samples", day, host, ["gpu_index", "gpu_uuid"])
            for index, uuid in zip(table.column("gpu_index").to_pylist(), table.column("gpu_uuid").to_pylist()):
                if uuid is not None and index is not None:
                    found.setdefault(uuid, int(index))
        return sorted((index, uuid) for uuid, index in found.items())

    def job_gpus(self, host: str, days: Iterable[str], job_id: str) -> set[str]:
        """UUIDs of the GPUs the process map saw Slurm job `job_id` on, on `host` those days."""
        uuids: set[str] = set()
        for day in days:
            table = self._partition("gpu_processes", day, host, ["gpu_uuid", "job_id", "scheduler"])
            if not table.num_rows:
                continue
            mine = pc.and_(pc.equal(table.column("job_id"), job_id), pc.equal(table.column("scheduler"), "slurm"))
            uuids |= set(table.filter(pc.fill_null(mine, False)).column("gpu_uuid").to_pylist())
        return uuids


    def placed_gpus(self, host: str, day: str, job_id: str, started_at) -> dict[str, str]:
        """{gpu_uuid: gpu_assignment} of the lake's `jobs` rows of this holding on `host` (`day`: its
        start's UTC day, the partition it is filed under); empty when none."""
        table = self._partition("jobs", day, host, ["job_id", "started_at", "gpu_uuid", "gpu_assignment"])
        if not table.num_rows:
            return {}
        mine = pc.fill_null(pc.equal(table.column("job_id"), job_id), False)
        return {row["gpu_uuid"]: row["gpu_assignment"] for row in table.filter(mine).to_pylist()
                if row["started_at"] == started_at and row["gpu_uuid"] is not None}


def read_columns(path: Path | str, columns: list[str]) -> pa.Table:
    """`columns` of one lake file; a column the file lacks comes back NULL (files of other tools)."""
    if isinstance(path, Path):
        schema = pq.read_schema(path)
        present = [c for c in columns if c in schema.names]
        table = pq.read_table(path, columns=present)
    else:
        fs = lakefs.filesystem(path)
        inner = path.split("://", 1)[1]
        with fs.open(inner, "rb") as fh:
            table = pq.read_table(fh)
        table = table.select([c for c in columns if c in table.column_names])
    for name in columns:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.string()))
    return table.select(columns)
