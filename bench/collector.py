"""Node collector costs, each beside a baseline measured in the same run.

- CPU: the real NvmlSource + Collector loop (spool, fsync, roll) in a subprocess whose
  `libnvidia-ml.so.1` is the NVML stand-in (tests/nvml_stub), 8 GPUs at 1 Hz and 10 Hz, as % of
  one core and as CPU microseconds per GPU-sample; baseline: a bare loop calling the same
  pynvml getters at the same rate and keeping nothing. The ratio is the collector's overhead.
  Steady state: from the first poll to the last (NVML start-up and the final flush left out),
  with a spool fsync every 2 s and a Parquet roll every third of the run (production: 300 s,
  so the roll share is overstated). The stand-in re-reads its state file on every call: the
  absolute figures carry that cost on both sides.
- Writer: rows per CPU-second (one core) of write_dataset on a simulated host-day (8 GPUs at
  1 Hz, rows in poll order as the spool holds them); baseline: pyarrow's `pq.write_table` of
  the same rows with default settings. Also bytes per row of each.
- Storage: the lake's bytes per GPU-sample on a simulated fleet-day (simulate_fleet), and on one
  host-day of it beside the same samples backfilled into a real Prometheus TSDB (promtool
  tsdb create-blocks-from openmetrics; one series per GPU and metric, every non-NULL numeric
  lake column; the size of the blocks it produced); also per metric value. The TSDB side uses
  one host-day (12 M samples) to keep the run short: both figures are per sample.
--quick: 4 s CPU runs, a 1-hour slice of one host for the writer and the storage comparison.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.common import BenchContext, Figure, cpu_timed, dir_bytes

SECTION = "collector"
REPO = Path(__file__).resolve().parents[1]
GPUS_PER_HOST = 8
KEY_COLUMNS = {"gpu_index"}  # a label in Prometheus, a key in the lake: not a metric

CHILD = r"""
import json, resource, sys, threading, time
mode, hz, seconds, work = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]

def cpu_s():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

# (CPU s, wall s, GPU-samples so far) after each poll: the steady state is first -> last poll,
# leaving out NVML start-up and the final flush.
stamps = []
if mode == "collector":
    from collectors.collect import Collector, Scheduled
    from collectors.settings import CollectorSettings
    from collectors.sources.nvml import NvmlSource
    stop = threading.Event()
    # Rolls every third of the run (production: every 300 s), so the window pays for some.
    settings = CollectorSettings(interval_s=1.0 / hz, roll_interval_s=seconds / 3)
    collector = Collector([Scheduled(NvmlSource("node-01"), required=True)], lake=work + "/lake",
                          settings=settings, spool_dir=work + "/spool")
    poll = collector.poll
    def stamped_poll():
        poll()
        stamps.append((cpu_s(), time.monotonic(), collector.stats.rows))
    collector.poll = stamped_poll
    threading.Timer(seconds, stop.set).start()
    collector.run(stop)
else:
    import pynvml
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    calls = [
        (pynvml.nvmlDeviceGetPowerUsage, ()), (pynvml.nvmlDeviceGetTotalEnergyConsumption, ()),
        (pynvml.nvmlDeviceGetTemperature, (pynvml.NVML_TEMPERATURE_GPU,)),
        (pynvml.nvmlDeviceGetFieldValues, ([82],)),
        (pynvml.nvmlDeviceGetClockInfo, (pynvml.NVML_CLOCK_SM,)), (pynvml.nvmlDeviceGetClockInfo, (pynvml.NVML_CLOCK_MEM,)),
        (pynvml.nvmlDeviceGetUtilizationRates, ()), (pynvml.nvmlDeviceGetMemoryInfo, ()),
        (pynvml.nvmlDeviceGetEnforcedPowerLimit, ()),
        (pynvml.nvmlDeviceGetPcieThroughput, (pynvml.NVML_PCIE_UTIL_TX_BYTES,)),
        (pynvml.nvmlDeviceGetPcieThroughput, (pynvml.NVML_PCIE_UTIL_RX_BYTES,)),
        (pynvml.nvmlDeviceGetPerformanceState, ()), (pynvml.nvmlDeviceGetComputeRunningProcesses, ()),
        (pynvml.nvmlDeviceGetCurrentClocksEventReasons, ()),
    ]
    samples, start = 0, time.monotonic()
    next_at = start
    while time.monotonic() - start < seconds:
        for handle in handles:
            for fn, args in calls:
                try:
                    fn(handle, *args)
                except pynvml.NVMLError:
                    pass
            samples += 1
        stamps.append((cpu_s(), time.monotonic(), samples))
        next_at += 1.0 / hz
        time.sleep(max(0.0, next_at - time.monotonic()))
    pynvml.nvmlShutdown()
(c0, w0, n0), (c1, w1, n1) = stamps[0], stamps[-1]
print(json.dumps({"cpu_s": c1 - c0, "wall_s": w1 - w0, "samples": n1 - n0}))
"""


def _nvml_stub_env(work: Path) -> dict[str, str]:
    """Build the stand-in NVML library with 8 GPUs; the environment that makes pynvml load it."""
    sys.path.insert(0, str(REPO / "tests"))
    from nvml_stub.fixture import GpuState, NvmlStub, build_stub

    library = build_stub(work / "nvml_stub")
    stub = NvmlStub(library, work / "nvml_state.txt")
    stub.write([GpuState.a100(i) if i < 4 else GpuState.h100(i) for i in range(GPUS_PER_HOST)])
    return stub.env({**os.environ, "PYTHONPATH": str(REPO)})


def cpu_figures(ctx: BenchContext) -> list[Figure]:
    seconds = 4.0 if ctx.quick else 30.0
    env = _nvml_stub_env(ctx.work_dir)
    runs = {}
    # All four at once: CPU time, not wall time, is measured, and the run takes `seconds` once.
    for hz in (1, 10):
        for mode in ("collector", "bare"):
            work = ctx.work_dir / f"cpu-{mode}-{hz}"
            work.mkdir(parents=True)
            runs[(mode, hz)] = subprocess.Popen([sys.executable, "-c", CHILD, mode, str(hz), str(seconds), str(work)],
                                                env=env, stdout=subprocess.PIPE, text=True)
    results = {}
    for key, proc in runs.items():
        out, _ = proc.communicate(timeout=seconds + 120)
        if proc.returncode != 0:
            raise RuntimeError(f"bench child {key} failed with exit {proc.returncode}")
        results[key] = json.loads(out.strip().splitlines()[-1])
    figures = []
    for hz in (1, 10):
        col, bare = results[("collector", hz)], results[("bare", hz)]
        pct = lambda r: 100.0 * r["cpu_s"] / r["wall_s"]  # noqa: E731
        us = lambda r: 1e6 * r["cpu_s"] / r["samples"]  # noqa: E731
        figures.append(Figure(SECTION, f"CPU, 8 GPUs at {hz} Hz", pct(col), "% of one core",
                              "bare pynvml loop", pct(bare), "< 1% of one core" if hz == 1 else ""))
        figures.append(Figure(SECTION, f"CPU per GPU-sample at {hz} Hz", us(col), "us",
                              "bare pynvml loop", us(bare)))
    return figures


def _simulate(ctx: BenchContext, gpus: int) -> Path:
    from collectors.sim.simulate import simulate_fleet

    lake = ctx.work_dir / f"sim-{gpus}" / "lake"
    simulate_fleet(lake, gpus=gpus, days=1, start=dt.date(2026, 1, 5), seed=1, interval_s=1.0)
    return lake


def _host_day(lake: Path, host: str, hours: float | None) -> tuple[pa.Table, list[Path]]:
    """One host's gpu_samples of the simulated day (optionally its first `hours`), and its files."""
    files = sorted((lake / "gpu_samples").glob(f"date=*/host={host}/*.parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in files])
    if hours is not None:
        first = pc.min(table.column("sampled_at")).value
        limit = pa.scalar(first + int(hours * 3600e6), table.schema.field("sampled_at").type)
        table = table.filter(pc.less(table.column("sampled_at"), limit))
    return table, files


def writer_figures(ctx: BenchContext, host_day: pa.Table) -> list[Figure]:
    from collectors.writer import write_dataset

    # The spool hands the writer rows in poll order (every GPU at t, then at t+1...).
    rows = host_day.sort_by([("sampled_at", "ascending"), ("gpu_index", "ascending")])
    best_writer = best_plain = float("inf")
    writer_bytes = plain_bytes = 0
    for attempt in range(3):  # best of three: the machine is shared
        out = ctx.work_dir / f"writer-{attempt}"
        cpu_s, written = cpu_timed(lambda: write_dataset(out / "lake", "gpu_samples", rows))
        best_writer, writer_bytes = min(best_writer, cpu_s), sum(w.bytes for w in written)
        plain = out / "plain.parquet"
        cpu_s, _ = cpu_timed(lambda: pq.write_table(rows, plain))
        best_plain, plain_bytes = min(best_plain, cpu_s), plain.stat().st_size
        shutil.rmtree(out)
    n = rows.num_rows
    what = "1 host-hour" if ctx.quick else "1 host-day"
    return [
        Figure(SECTION, f"writer throughput ({what}, {n:,} rows)", n / best_writer, "rows/s per core",
               "pq.write_table defaults", n / best_plain, "ratio >= 0.25 (it also sorts and fsyncs)"),
        Figure(SECTION, f"writer bytes per row ({what})", writer_bytes / n, "B",
               "pq.write_table defaults", plain_bytes / n, "ratio < 1"),
    ]


def metric_columns(table: pa.Table) -> list[str]:
    """The numeric lake columns that hold at least one reading: the metrics both stores keep."""
    return [f.name for f in table.schema
            if (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)) and f.name not in KEY_COLUMNS
            and table.column(f.name).null_count < table.num_rows]


def write_openmetrics(table: pa.Table, path: Path) -> int:
    """gpu_samples rows as OpenMetrics text for promtool: a family per metric (`jh_<column>`),
    a series per GPU labelled as dcgm-exporter labels them, timestamps in seconds, NULLs left
    out, values exactly as the lake holds them (float32 written as its exact float64). Returns
    the number of values written."""
    table = table.sort_by([("gpu_uuid", "ascending"), ("sampled_at", "ascending")])
    uuids = table.column("gpu_uuid").to_numpy(zero_copy_only=False)
    bounds = (np.flatnonzero(uuids[1:] != uuids[:-1]) + 1).tolist()
    spans = list(zip([0, *bounds], [*bounds, len(uuids)]))
    ts_s = [repr(t) for t in (table.column("sampled_at").cast(pa.int64()).to_numpy() / 1e6).tolist()]
    hosts, index, models = (table.column(c).to_pylist() for c in ("host", "gpu_index", "gpu_model"))
    values_written = 0
    with open(path, "w") as fh:
        for metric in metric_columns(table):
            counter = metric.endswith("_total")
            family = metric[: -len("_total")] if counter else metric
            fh.write(f"# TYPE jh_{family} {'counter' if counter else 'gauge'}\n")
            values = table.column(metric).to_pylist()
            for start, end in spans:
                labels = (f'jh_{metric}{{host="{hosts[start]}",gpu="{index[start]}",UUID="{uuids[start]}",'
                          f'modelName="{models[start]}"}} ')
                lines = [f"{labels}{values[i]!r} {ts_s[i]}\n" for i in range(start, end) if values[i] is not None]
                fh.write("".join(lines))
                values_written += len(lines)
        fh.write("# EOF\n")
    return values_written


def tsdb_bytes(table: pa.Table, work: Path) -> tuple[int, int]:
    """(bytes of the Prometheus blocks promtool backfills from `table`, values stored)."""
    text, blocks = work / "samples.om.txt", work / "tsdb"
    values = write_openmetrics(table, text)
    done = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text), str(blocks)],
                          capture_output=True, text=True)
    text.unlink()
    if done.returncode != 0:
        raise RuntimeError(f"promtool backfill failed: {done.stderr.strip()[-500:]}")
    return dir_bytes(blocks), values


def storage_figures(ctx: BenchContext, lake: Path, host_day: pa.Table, host_files: list[Path]) -> list[Figure]:
    from collectors.writer import write_dataset

    figures = []
    if not ctx.quick:
        fleet_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in (lake / "gpu_samples").rglob("*.parquet"))
        figures.append(Figure(SECTION, f"lake bytes per GPU-sample (fleet-day, {fleet_rows:,} samples)",
                              dir_bytes(lake / "gpu_samples", "*.parquet") / fleet_rows, "B"))
        lake_bytes = sum(f.stat().st_size for f in host_files)
    else:  # the 1-hour slice written as the collector would write it
        lake_bytes = sum(w.bytes for w in write_dataset(ctx.work_dir / "slice-lake", "gpu_samples", host_day))
    work = ctx.work_dir / "tsdb"
    work.mkdir()
    prom_bytes, values = tsdb_bytes(host_day, work)
    n = host_day.num_rows
    what = "1 host-hour" if ctx.quick else "1 host-day"
    figures += [
        Figure(SECTION, f"lake bytes per GPU-sample ({what}, {len(metric_columns(host_day))} metrics)",
               lake_bytes / n, "B", "Prometheus TSDB blocks", prom_bytes / n, "ratio < 1"),
        Figure(SECTION, f"lake bytes per metric value ({what}, {values:,} values)", lake_bytes / values, "B",
               "Prometheus TSDB blocks", prom_bytes / values, "ratio < 1"),
    ]
    return figures


def run(ctx: BenchContext) -> list[Figure]:
    figures = cpu_figures(ctx)
    lake = _simulate(ctx, GPUS_PER_HOST if ctx.quick else 4 * GPUS_PER_HOST)
    host_day, host_files = _host_day(lake, "node-01", 1.0 if ctx.quick else None)
    figures += writer_figures(ctx, host_day)
    figures += storage_figures(ctx, lake, host_day, host_files)
    return figures
