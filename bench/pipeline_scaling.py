"""Seconds per million readings as the fleet grows (`python -m bench --scaling`): the daily
pipeline on 64, 256 and 1,024 GPUs (--quick: 8, 16 and 64), beside the one-aggregate floor on the
same files. The lakes are cut from the bench's fleet-day (faults included) rather than simulated
again: the smaller one is the fleet's first hosts (whole day), the larger one four copies of every
host for the first hours of the day (new host names and GPU UUIDs; facility power scaled with the
fleet). Target: flat, the largest s/M within 15% of the smallest.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench.common import Figure
from joulehouse.collectors.writer import replace_partition

DAY = dt.date(2026, 3, 2)
HOST_DATASETS = ("gpu_samples", "node_samples", "jobs")
GPUS_PER_HOST = 8


def _read(lake: Path, dataset: str, host: str) -> pa.Table:
    return ds.dataset(lake / dataset / f"date={DAY.isoformat()}" / f"host={host}", format="parquet").to_table()


def _hosts(lake: Path) -> list[str]:
    return sorted(p.name.removeprefix("host=") for p in (lake / "gpu_samples" / f"date={DAY.isoformat()}").iterdir())


def _facility(lake: Path, out: Path, scale: float, until: dt.datetime | None) -> None:
    part = lake / "facility_samples" / f"date={DAY.isoformat()}"
    for site_dir in part.iterdir():
        table = ds.dataset(site_dir, format="parquet").to_table()
        if until is not None:
            table = table.filter(pc.field("sampled_at") < until)
        for col in ("facility_power_w", "it_power_w"):
            i = table.schema.get_field_index(col)
            table = table.set_column(i, col, pc.multiply(table.column(col), scale))
        replace_partition(out, "facility_samples", DAY.isoformat(), site_dir.name.removeprefix("host="), table)


def subset_lake(lake: Path, out: Path, hosts: int) -> int:
    """The first `hosts` hosts of `lake` (files copied as they are), facility power scaled; the
    number of GPUs kept."""
    all_hosts = _hosts(lake)
    keep = all_hosts[:hosts]
    for dataset in HOST_DATASETS:
        for host in keep:
            src = lake / dataset / f"date={DAY.isoformat()}" / f"host={host}"
            if src.is_dir():
                shutil.copytree(src, out / dataset / f"date={DAY.isoformat()}" / f"host={host}")
    _facility(lake, out, len(keep) / len(all_hosts), None)
    lines = (lake.parent / "inventory.csv").read_text().splitlines()
    header = lines[0].split(",")
    host_col = header.index("host")
    kept = [ln for ln in lines[1:] if ln.split(",")[host_col] in keep]
    (out.parent / "inventory.csv").write_text("\n".join([lines[0], *kept]) + "\n")
    return len(kept)


def replicated_lake(lake: Path, out: Path, copies: int, hours: int) -> int:
    """`copies` copies of every host of `lake` for the first `hours` of the day, each copy under
    new host names and GPU UUIDs (suffix -rK), written by the lake's own writer; the number of GPUs."""
    until = dt.datetime.combine(DAY, dt.time(), dt.timezone.utc) + dt.timedelta(hours=hours)
    hosts = _hosts(lake)
    for dataset in HOST_DATASETS:
        time_col = "started_at" if dataset == "jobs" else "sampled_at"
        for host in hosts:
            if not (lake / dataset / f"date={DAY.isoformat()}" / f"host={host}").is_dir():
                continue
            table = _read(lake, dataset, host)
            table = table.filter(pc.field(time_col) < until)
            for k in range(copies):
                suffix = f"-r{k}" if k else ""
                copy = table
                for col in ("host", "gpu_uuid"):
                    if col in copy.column_names:
                        i = copy.schema.get_field_index(col)
                        copy = copy.set_column(i, col, pc.binary_join_element_wise(
                            copy.column(col), pa.scalar(suffix), ""))
                replace_partition(out, dataset, DAY.isoformat(), host + suffix, copy)
    _facility(lake, out, float(copies), until)
    lines = (lake.parent / "inventory.csv").read_text().splitlines()
    header = lines[0].split(",")
    uuid_col, host_col = header.index("gpu_uuid"), header.index("host")
    rows = [lines[0]]
    for k in range(copies):
        for ln in lines[1:]:
            cells = ln.split(",")
            if k:
                cells[uuid_col] += f"-r{k}"
                cells[host_col] += f"-r{k}"
            rows.append(",".join(cells))
    (out.parent / "inventory.csv").write_text("\n".join(rows) + "\n")
    return len(rows) - 1


def scaling_figures(section: str, root: Path, lake: Path, gpus: int, big_hours: int, main: tuple[dict, dict],
                    measure: Callable[[str, Path], tuple[dict, float]]) -> list[Figure]:
    """s/M readings of the pipeline at gpus/4, gpus (the bench's own run, `main` = (pipeline,
    floor)) and 4 x gpus, and the ratio of the largest to the smallest."""
    runs = [(gpus, 24, *main)]
    small, big = root / "quarter" / "lake", root / "fourfold" / "lake"
    small_gpus = subset_lake(lake, small, hosts=max(1, gpus // 4 // GPUS_PER_HOST))
    big_gpus = replicated_lake(lake, big, copies=4, hours=big_hours)
    for size_gpus, hours, path in ((small_gpus, 24, small), (big_gpus, big_hours, big)):
        floor, _ = measure("floor", path)
        pipe, mib = measure("pipeline", path)
        print(f"scaling: {size_gpus} GPUs x {hours} h: {pipe['samples'] / 1e6:.1f} M samples, floor "
              f"{floor['floor_s']:.2f} s, pipeline {pipe['total_s']:.2f} s ({mib:.0f} MiB) "
              + json.dumps({k: round(v, 2) for k, v in pipe["seconds"].items()}), flush=True)
        runs.append((size_gpus, hours, pipe, floor))
    figures, per_million = [], []
    for size_gpus, hours, pipe, floor in sorted(runs, key=lambda r: r[0]):
        per_m = pipe["total_s"] / (pipe["samples"] / 1e6)
        per_million.append(per_m)
        figures.append(Figure(section, f"scaling: {size_gpus} GPUs x {hours} h ({pipe['samples'] / 1e6:.1f} M)",
                              per_m, "s/M samples", "floor s/M samples", floor["floor_s"] / (floor["samples"] / 1e6),
                              "flat with fleet size"))
    figures.append(Figure(section, f"scaling: s/M samples, most vs least ({', '.join(str(r[0]) for r in sorted(runs))} GPUs)",
                          max(per_million), "s/M samples", "least s/M samples", min(per_million), "<= 1.15 (flat)"))
    return figures
