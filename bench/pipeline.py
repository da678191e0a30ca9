"""The daily pipeline on a fleet-day, against the floor and against pandas, and how it scales.

Data: one simulated fleet-day (collectors.sim.simulate_fleet) of 256 GPUs at 1 Hz (22 M samples;
--quick: 16 GPUs), written once per bench run into its temp folder. The scaling lakes are cut
from it rather than simulated again: a quarter of the fleet (its first hosts, whole day) and
four times the fleet for the first 3 hours (copies of every host under new host names and GPU
UUIDs: 1024 GPUs x 3 h = 11 M samples, --quick: 64 x 6 h; facility power scaled with the fleet).

Each measured thing runs in its own interpreter (bench/pipeline_steps.py), so its wall time and
peak memory (VmHWM, counted from exec) are its own:
- pipeline: joulehouse's daily steps called directly as the DAG's tasks call them (build_day,
  run_checks, fit_day, carbon_day, tco_day, recommend_day) on a fresh warehouse file;
- floor: one DuckDB aggregate over the same day's files (hourly sum of power per GPU), same
  threads and memory limit (the warehouse's defaults), min of 3;
- pandas: read the day, group by GPU and hour, integrate, fit with numpy (what a team writes
  without joulehouse);
- persist: the day's files copied once into a DuckDB table (CREATE TABLE AS, checkpointed), and
  gx_import: importing Great Expectations. Together with the floor they are the least the pipeline
  can cost while stg_gpu_samples is a table of the readings and the checks run in GX.
Per-step figures: build_day against the floor (issue 4), fit_day against one plain scan of the
rows it fits (issue 5). Scaling: pipeline seconds per million samples beside the floor's.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench.common import BenchContext, Figure
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.collectors.writer import replace_partition

SECTION = "pipeline"
REPO = Path(__file__).resolve().parents[1]
DAY = dt.date(2026, 3, 2)
HOST_DATASETS = ("gpu_samples", "node_samples", "jobs")


def _measure(mode: str, lake: Path) -> tuple[dict, float]:
    """Run one measurement in a fresh interpreter: its JSON result and its peak memory (MiB)."""
    proc = subprocess.run([sys.executable, "-m", "bench.pipeline_steps", mode, str(lake), DAY.isoformat()],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"bench.pipeline_steps {mode} {lake} failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return result, result["peak_rss_mib"]


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


def run(ctx: BenchContext) -> list[Figure]:
    gpus, big_hours = (16, 6) if ctx.quick else (256, 3)
    root = ctx.work_dir / SECTION
    lake = root / f"g{gpus}" / "lake"
    print(f"pipeline: simulating {gpus} GPUs x 1 day at 1 Hz ...", flush=True)
    simulate_fleet(lake, gpus=gpus, days=1, start=DAY, seed=0, interval_s=1.0)

    floor, floor_mib = _measure("floor", lake)
    pipe, pipe_mib = _measure("pipeline", lake)
    pandas, pandas_mib = _measure("pandas", lake)
    kept, _ = _measure("persist", lake)
    gx, _ = _measure("gx_import", lake)
    n = pipe["samples"]
    size = f"{gpus} GPUs x 24 h @ 1 Hz = {n / 1e6:.1f} M samples"
    print(f"pipeline: {size}: floor {floor['floor_s']:.2f} s ({floor_mib:.0f} MiB), pipeline "
          f"{pipe['total_s']:.2f} s ({pipe_mib:.0f} MiB) {json.dumps({k: round(v, 2) for k, v in pipe['seconds'].items()})}, "
          f"pandas {pandas['total_s']:.2f} s ({pandas_mib:.0f} MiB)", flush=True)
    print("pipeline: build_day steps " + json.dumps({k: round(v, 2) for k, v in pipe["build_seconds"].items()}))
    figures = [
        Figure(SECTION, f"daily pipeline wall ({size})", pipe["total_s"], "s",
               "floor: one DuckDB aggregate", floor["floor_s"], "<= 3x the floor"),
        Figure(SECTION, "daily pipeline wall vs pandas", pipe["total_s"], "s",
               "pandas: read, group, integrate, numpy fit", pandas["total_s"], "<= 0.2 (5x faster)"),
        Figure(SECTION, "daily pipeline peak memory", pipe_mib, "MiB", "pandas peak memory", pandas_mib,
               "bounded (memory_limit 4GB + Python)"),
        Figure(SECTION, "floor peak memory", floor_mib, "MiB"),
        Figure(SECTION, "build_day (warehouse of a fleet-day)", pipe["seconds"]["build_day"], "s",
               "floor: one DuckDB aggregate", floor["floor_s"], "issue 4: a small multiple"),
        Figure(SECTION, "fit_day (power models of a fleet-day)", pipe["seconds"]["fit_day"], "s",
               "plain scan of the fit's columns", pipe["stg_scan_s"], "issue 5: a small multiple (<= ~20x)"),
    ]
    # The part of the pipeline no query plan removes while stg_gpu_samples is a table of the day's
    # readings and the checks are Great Expectations: one copy of the readings and GX's import.
    contract_floor = floor["floor_s"] + kept["persist_s"] + gx["gx_import_s"]
    figures += [
        Figure(SECTION, "copy of the day's readings into DuckDB (CTAS)", kept["persist_s"], "s",
               "floor: one DuckDB aggregate", floor["floor_s"]),
        Figure(SECTION, "import great_expectations (fresh interpreter)", gx["gx_import_s"], "s",
               "floor: one DuckDB aggregate", floor["floor_s"]),
        Figure(SECTION, "daily pipeline vs floor + one copy + GX import", pipe["total_s"], "s",
               "floor + CTAS + import", contract_floor),
    ]
    for step in ("run_checks", "carbon_day", "tco_day", "recommend_day"):
        figures.append(Figure(SECTION, f"{step}", pipe["seconds"][step], "s", "floor", floor["floor_s"]))

    scaling = [(gpus, 24, pipe, floor)]
    small, big = root / "quarter" / "lake", root / "fourfold" / "lake"
    small_gpus = subset_lake(lake, small, hosts=max(1, gpus // 4 // 8))
    big_gpus = replicated_lake(lake, big, copies=4, hours=big_hours)
    for size_gpus, hours, path in ((small_gpus, 24, small), (big_gpus, big_hours, big)):
        f, _ = _measure("floor", path)
        p, mib = _measure("pipeline", path)
        print(f"pipeline: {size_gpus} GPUs x {hours} h: {p['samples'] / 1e6:.1f} M samples, floor "
              f"{f['floor_s']:.2f} s, pipeline {p['total_s']:.2f} s ({mib:.0f} MiB) "
              + json.dumps({k: round(v, 2) for k, v in p["seconds"].items()}), flush=True)
        scaling.append((size_gpus, hours, p, f))
    for size_gpus, hours, p, f in sorted(scaling, key=lambda s: s[0]):
        per_m = p["total_s"] / (p["samples"] / 1e6)
        floor_per_m = f["floor_s"] / (f["samples"] / 1e6)
        figures.append(Figure(SECTION, f"scaling: {size_gpus} GPUs x {hours} h ({p['samples'] / 1e6:.1f} M)",
                              per_m, "s/M samples", "floor s/M samples", floor_per_m, "flat with fleet size"))
    return figures
