"""The day's lake partitions, looked at before the warehouse reads them.

Each (dataset, day, host) partition is independent, so the DAG maps one task per host over
`inspect_partition` (read-only: files that do not open, or whose schema does not match the
dataset's, are named before the build, and the counts say what each host delivered), followed in
the same task by warehouse/lake_compact.py's compaction of that host's day.
"""

from __future__ import annotations

import datetime as dt
import posixpath
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pyarrow.parquet as pq

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import DATASETS


@dataclass(frozen=True)
class PartitionReport:
    """What one host's partition of one dataset holds for one day."""

    dataset: str
    day: str
    host: str
    files: int
    rows: int
    bytes: int
    unreadable: list[str] = field(default_factory=list)
    schema_mismatch: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


class NoReadingsForDay(RuntimeError):
    """The lake holds no GPU readings for the day: nothing to build (a wrong lake path, or the
    nodes did not ship). A daily run fails on it rather than succeed having built nothing."""


def _listing(lake: str | Path) -> tuple[Any, Callable[..., str]]:
    """(fsspec filesystem of the lake, local or object store; a join of lake-relative parts as a
    path string): one code path for both kinds of lake."""
    fs = lakefs.filesystem(lake) if lakefs.is_url(lake) else fsspec.filesystem("file")
    return fs, lambda *parts: str(lakefs.join(lake, *parts))


def _subfolders(fs: Any, folder: str) -> list[str]:
    if not fs.isdir(folder):
        return []
    return [posixpath.basename(str(e["name"]).rstrip("/")) for e in fs.ls(folder, detail=True)
            if e.get("type") == "directory"]


def day_hosts(lake: str | Path, day: dt.date, datasets: Iterable[str] = ("gpu_samples",)) -> list[str]:
    """The hosts that have a `date=<day>` partition of any of `datasets` (sorted), on a local or an
    object-store lake. A site's facility meter writes under `host=<site>`, so with every dataset the
    site is one of the "hosts"."""
    fs, at = _listing(lake)
    hosts: set[str] = set()
    for dataset in datasets:
        hosts |= {name.removeprefix("host=") for name in _subfolders(fs, at(dataset, f"date={day.isoformat()}"))
                  if name.startswith("host=")}
    return sorted(hosts)


def lake_folder_problem(lake: str | Path) -> str | None:
    """What is wrong with a local lake path ("is a file", "does not exist"); None for a folder or a URL."""
    if lakefs.is_url(str(lake)) or Path(lake).is_dir():
        return None
    return "is a file" if Path(lake).exists() else "does not exist"


def gpu_hosts_or_raise(lake: str | Path, day: dt.date) -> list[str]:
    """The hosts with GPU readings for `day`; NoReadingsForDay (saying where it looked) when none."""
    hosts = day_hosts(lake, day)
    if not hosts:
        where = lakefs.join(lake, "gpu_samples", f"date={day.isoformat()}")
        if (what := lake_folder_problem(lake)) is not None:
            raise NoReadingsForDay(f"no GPU readings for {day}: the lake {lake} ([lake] path) {what}, "
                                   "not the lake's folder")
        raise NoReadingsForDay(f"no GPU readings for {day} in the lake (no host= folder under {where}): nothing "
                               "to build; check [lake] path and that the nodes have shipped this day")
    return hosts


def host_datasets(lake: str | Path, day: dt.date, host: str) -> list[str]:
    """The datasets (in DATASETS order) that have a partition of `host` on `day`."""
    fs, at = _listing(lake)
    return [d for d in DATASETS if f"host={host}" in _subfolders(fs, at(d, f"date={day.isoformat()}"))]


def inspect_partition(lake: str | Path, day: dt.date, host: str, dataset: str = "gpu_samples") -> PartitionReport:
    """Open every file's footer in one partition: count rows and bytes, name the files that do not
    open or lack a column the dataset requires (with the column)."""
    fs, at = _listing(lake)
    paths = sorted(fs.glob(posixpath.join(at(dataset, f"date={day.isoformat()}", f"host={host}"), "*.parquet")))
    required = {f.name for f in DATASETS[dataset] if not f.nullable}
    files = rows = size = 0
    unreadable: list[str] = []
    mismatch: list[str] = []
    for path in paths:
        name = posixpath.basename(path)
        files += 1
        size += fs.size(path)
        try:
            with fs.open(path, "rb") as fh:
                meta = pq.read_metadata(fh)
        except (OSError, ValueError) as exc:
            unreadable.append(f"{name}: {exc}")
            continue
        rows += meta.num_rows
        missing = required - set(meta.schema.names)
        if missing:
            mismatch.append(f"{name}: missing {sorted(missing)}")
    return PartitionReport(dataset, day.isoformat(), host, files, rows, size, unreadable, mismatch)
