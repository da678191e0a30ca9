"""The daily pipeline on a fleet-day, against the floor, pandas and polars, and how it scales.

Data: one simulated fleet-day (collectors.sim.simulate_fleet) of 256 GPUs at 1 Hz (22 M samples;
--quick: 16 GPUs), written once per bench run into its temp folder, with the faults of a real
fleet added (bench/lake_faults.py: duplicates, some invalid; a counter reset; a gap longer than
the bridge limit; quarantined readings; GPUs seen by NVML and DCGM).

Each measured thing runs in its own interpreter (bench/pipeline_steps.py), so its wall time and
peak memory (VmHWM, counted from exec) are its own:
- pipeline: the daily run's critical path, joulehouse's steps called directly as the DAG's tasks
  call them (build_day, run_gate, fit_day, carbon_day, tco_day, recommend_day) on a fresh
  warehouse file; then, outside its total, Great Expectations' task (its own interpreter), the ad
  hoc query over the day's stg_gpu_samples through `joulehouse sql`'s read-only door, and one
  copy of the file as each writing step of the DAG makes to publish its work;
- floor: one DuckDB aggregate over the same day's files (hourly sum of power per GPU), same
  threads and memory limit (the warehouse's defaults), min of 3;
- pandas / polars: read the day, group by GPU and hour, integrate, fit with numpy (what a team
  writes without joulehouse), each the same work;
- persist: the day's files written once as Parquet the way the build keeps stg_gpu_samples, against
  the same rows copied into a DuckDB table (CREATE TABLE AS, checkpointed: how it was kept before);
  the ad hoc query over the readings files against the same query over such a table;
  gx_import: importing Great Expectations, for scale.
Per-step figures: build_day against the floor, fit_day against one plain scan of the rows it
fits. `--scaling`: seconds per million readings at 64, 256 and 1,024 GPUs (bench/pipeline_scaling.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench.common import BenchContext, Figure
from bench.lake_faults import add_faults
from bench.pipeline_scaling import DAY, scaling_figures
from joulehouse.collectors.sim import simulate_fleet

SECTION = "pipeline"
REPO = Path(__file__).resolve().parents[1]


def _measure(mode: str, lake: Path) -> tuple[dict, float]:
    """Run one measurement in a fresh interpreter: its JSON result and its peak memory (MiB)."""
    proc = subprocess.run([sys.executable, "-m", "bench.pipeline_steps", mode, str(lake), DAY.isoformat()],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"bench.pipeline_steps {mode} {lake} failed (exit {proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # the pipeline's figure is its critical path's peak, not that of the measurements made after it
    return result, result.get("critical_path_peak_mib", result["peak_rss_mib"])


def run(ctx: BenchContext) -> list[Figure]:
    gpus, big_hours = (16, 6) if ctx.quick else (256, 3)
    root = ctx.work_dir / SECTION
    lake = root / f"g{gpus}" / "lake"
    print(f"pipeline: simulating {gpus} GPUs x 1 day at 1 Hz ...", flush=True)
    simulate_fleet(lake, gpus=gpus, days=1, start=DAY, seed=0, interval_s=1.0)
    print("pipeline: faults added " + json.dumps(add_faults(lake, DAY)), flush=True)

    floor, floor_mib = _measure("floor", lake)
    pipe, pipe_mib = _measure("pipeline", lake)
    pandas, pandas_mib = _measure("pandas", lake)
    polars, polars_mib = _measure("polars", lake)
    kept, _ = _measure("persist", lake)
    gx, _ = _measure("gx_import", lake)
    # The same work: the same GPU-hours and the same fitted exponent per GPU model, or the ratio lies.
    same = {k: (pandas[k], polars[k]) for k in ("samples", "gpu_hours", "alpha") if pandas[k] != polars[k]}
    print("pipeline: polars and pandas baselines agree" if not same else f"pipeline: BASELINES DIFFER {same}", flush=True)
    n = pipe["samples"]
    size = f"{gpus} GPUs x 24 h @ 1 Hz = {n / 1e6:.1f} M samples"
    print(f"pipeline: {size}: floor {floor['floor_s']:.2f} s ({floor_mib:.0f} MiB), pipeline "
          f"{pipe['total_s']:.2f} s ({pipe_mib:.0f} MiB) {json.dumps({k: round(v, 2) for k, v in pipe['seconds'].items()})}, "
          f"pandas {pandas['total_s']:.2f} s ({pandas_mib:.0f} MiB), polars {polars['total_s']:.2f} s "
          f"({polars_mib:.0f} MiB)", flush=True)
    print("pipeline: build_day steps " + json.dumps({k: round(v, 2) for k, v in pipe["build_seconds"].items()}))
    figures = [
        Figure(SECTION, f"daily pipeline wall ({size})", pipe["total_s"], "s",
               "floor: one DuckDB aggregate", floor["floor_s"], "<= 6x the floor"),
        Figure(SECTION, "daily pipeline wall vs pandas", pipe["total_s"], "s",
               "pandas: read, group, integrate, numpy fit", pandas["total_s"], "<= 0.2 (5x faster)"),
        Figure(SECTION, "daily pipeline wall vs polars", pipe["total_s"], "s",
               "polars: the same work as pandas", polars["total_s"], "below 1 (faster)"),
        Figure(SECTION, "daily pipeline peak memory", pipe_mib, "MiB", "pandas peak memory", pandas_mib,
               "<= 1536 MiB"),
        Figure(SECTION, "polars baseline peak memory", polars_mib, "MiB", "pandas peak memory", pandas_mib),
        Figure(SECTION, "floor peak memory", floor_mib, "MiB"),
        Figure(SECTION, "build_day (warehouse of a fleet-day)", pipe["seconds"]["build_day"], "s",
               "floor: one DuckDB aggregate", floor["floor_s"], "a small multiple"),
        Figure(SECTION, "fit_day (power models of a fleet-day)", pipe["seconds"]["fit_day"], "s",
               "plain scan of the fit's columns", pipe["stg_scan_s"], "a small multiple (<= ~20x)"),
        Figure(SECTION, f"ad hoc query over a day of stg_gpu_samples ({pipe['adhoc_rows']} rows, joulehouse sql)",
               pipe["adhoc_s"], "s", "floor: one DuckDB aggregate", floor["floor_s"], "about the floor"),
        Figure(SECTION, "the same query, readings kept as files (now) against a table in the file (before)",
               pipe["adhoc_s"], "s", "readings as a DuckDB table", pipe["adhoc_table_s"], "about 1"),
        Figure(SECTION, "blocking gate (SQL, run_gate)", pipe["seconds"]["run_gate"], "s",
               "import great_expectations", gx["gx_import_s"], "below 1: never waits for GX"),
        Figure(SECTION, "Great Expectations task (own interpreter, off the critical path)", pipe["gx_task_s"], "s",
               "floor: one DuckDB aggregate", floor["floor_s"]),
        Figure(SECTION, f"publish copy of the warehouse file ({pipe['warehouse_mb']:.0f} MB, per writing step)",
               pipe["publish_copy_s"], "s", "daily pipeline wall", pipe["total_s"]),
        Figure(SECTION, "one write of the day's readings as Parquet (how the build keeps them)", kept["persist_s"], "s",
               "the same rows into a DuckDB table (before)", kept["persist_table_s"], "below 1"),
    ]
    for step in ("carbon_day", "tco_day", "recommend_day"):
        figures.append(Figure(SECTION, f"{step}", pipe["seconds"][step], "s", "floor", floor["floor_s"]))
    if ctx.scaling:
        figures += scaling_figures(SECTION, root, lake, gpus, big_hours, (pipe, floor), _measure)
    return figures
