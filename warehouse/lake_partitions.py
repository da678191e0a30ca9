"""The day's lake partitions, looked at before the warehouse reads them.

Each (dataset, day, host) partition is independent, so the DAG maps one task per host over
`inspect_partition` (read-only: files that do not open, or whose schema does not match the
dataset's, are named before the build, and the counts say what each host delivered), followed in
the same task by warehouse/lake_compact.py's compaction of that host's day.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from collectors.schema import DATASETS


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


def day_hosts(lake: str | Path, day: dt.date, datasets: Iterable[str] = ("gpu_samples",)) -> list[str]:
    """The hosts that have a `date=<day>` partition of any of `datasets` (sorted). A site's facility
    meter writes under `host=<site>`, so with every dataset the site is one of the "hosts"."""
    hosts: set[str] = set()
    for dataset in datasets:
        folder = Path(lake) / dataset / f"date={day.isoformat()}"
        if folder.is_dir():
            hosts |= {p.name.removeprefix("host=") for p in folder.iterdir() if p.is_dir() and p.name.startswith("host=")}
    return sorted(hosts)


def host_datasets(lake: str | Path, day: dt.date, host: str) -> list[str]:
    """The datasets (in DATASETS order) that have a partition of `host` on `day`."""
    return [d for d in DATASETS if (Path(lake) / d / f"date={day.isoformat()}" / f"host={host}").is_dir()]


def inspect_partition(lake: str | Path, day: dt.date, host: str, dataset: str = "gpu_samples") -> PartitionReport:
    """Open every file's footer in one partition: count rows and bytes, name the files that do not
    open or lack a column the dataset requires (with the column)."""
    folder = Path(lake) / dataset / f"date={day.isoformat()}" / f"host={host}"
    required = {f.name for f in DATASETS[dataset] if not f.nullable}
    files = rows = size = 0
    unreadable: list[str] = []
    mismatch: list[str] = []
    for path in sorted(folder.glob("*.parquet")):
        files += 1
        size += path.stat().st_size
        try:
            meta = pq.read_metadata(path)
        except (OSError, ValueError) as exc:
            unreadable.append(f"{path.name}: {exc}")
            continue
        rows += meta.num_rows
        missing = required - set(meta.schema.names)
        if missing:
            mismatch.append(f"{path.name}: missing {sorted(missing)}")
    return PartitionReport(dataset, day.isoformat(), host, files, rows, size, unreadable, mismatch)
