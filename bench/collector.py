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
- Storage: the lake's bytes per GPU-sample and per metric value of a simulated fleet-day (4 hosts
  x 8 GPUs x 24 h at 1 Hz, 2.76 M GPU-samples) beside the same samples backfilled into a real
  Prometheus TSDB (promtool tsdb create-blocks-from openmetrics; one series per GPU and metric,
  every non-NULL numeric lake column; the bytes of the blocks it produced). Prometheus is fed
  the rows read back from the lake files, so both hold the same values, narrowed where the lake
  narrows them (the DCGM ratios to 2**-16, collectors/schema.py). Each host is backfilled on its
  own (one promtool run needs ~2 GB for a host-day) and the blocks' bytes are summed: a single
  TSDB would share one index per block, a few KB, which this adds per host. Also a per-column
  breakdown of the lake bytes from the Parquet footers.
--quick: 4 s CPU runs, a 1-hour slice of one host (8 GPUs) for the writer and the storage
  comparison (said so in the figure names: not a fleet-day).
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
    from joulehouse.collectors.collect import Collector, Scheduled
    from joulehouse.settings import CollectorSettings
    from joulehouse.collectors.sources.nvml import NvmlSource
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
    from joulehouse.collectors.sim.simulate import simulate_fleet

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
    from joulehouse.collectors.writer import write_dataset

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


def compaction_figures(ctx: BenchContext, host_day: pa.Table, roll_s: int = 300) -> list[Figure]:
    """The host's day as the collector rolls it (one file per `roll_s`), then compacted by the DAG."""
    from joulehouse.collectors.writer import write_dataset
    from joulehouse.warehouse.lake_compact import compact_host_day

    lake = ctx.work_dir / "rolled-lake"
    micros = host_day.column("sampled_at").cast(pa.int64())
    bucket = pc.divide(pc.subtract(micros, pc.min(micros)), pa.scalar(roll_s * 1_000_000, pa.int64()))
    for b in pc.unique(bucket).to_pylist():
        write_dataset(lake, "gpu_samples", host_day.filter(pc.equal(bucket, b)))
    day = dt.date.fromisoformat(next((lake / "gpu_samples").glob("date=*")).name.removeprefix("date="))
    cpu_s, reports = cpu_timed(lambda: compact_host_day(lake, day, "node-01"))
    (report,) = reports
    n = host_day.num_rows
    print(f"compaction: {report.files_before} files of {roll_s} s -> {report.files_after}, "
          f"{report.bytes_before:,} -> {report.bytes_after:,} bytes, {cpu_s:.2f} s CPU for {n:,} rows")
    return [Figure(SECTION, f"lake bytes per row after compaction ({report.files_before} files of {roll_s} s -> 1)",
                   report.bytes_after / n, "B", f"the collector's {roll_s} s files", report.bytes_before / n,
                   "ratio < 1"),
            Figure(SECTION, "compaction CPU per million rows", cpu_s / n * 1e6, "s")]


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


def _backfill(text: Path, blocks: Path) -> subprocess.Popen:
    return subprocess.Popen(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(text), str(blocks)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def tsdb_bytes(tables: list[pa.Table], work: Path, parallel: int = 2) -> tuple[int, int]:
    """(bytes of the Prometheus blocks promtool backfills from `tables`, one run per table with
    up to `parallel` at once, summed; values stored)."""
    running: list[tuple[subprocess.Popen, Path, Path]] = []
    total_bytes = total_values = 0

    def finish(proc: subprocess.Popen, text: Path, blocks: Path) -> int:
        _, err = proc.communicate()
        text.unlink()
        if proc.returncode != 0:
            raise RuntimeError(f"promtool backfill of {text.name} failed: {err.strip()[-500:]}")
        return dir_bytes(blocks)

    for i, table in enumerate(tables):
        if len(running) >= parallel:
            total_bytes += finish(*running.pop(0))
        text, blocks = work / f"samples-{i}.om.txt", work / f"tsdb-{i}"
        total_values += write_openmetrics(table, text)
        running.append((_backfill(text, blocks), text, blocks))
    for job in running:
        total_bytes += finish(*job)
    return total_bytes, total_values


def column_bytes(files: list[Path]) -> dict[str, int]:
    """Compressed bytes per column over `files`, from their Parquet footers, largest first."""
    sizes: dict[str, int] = {}
    for f in files:
        meta = pq.ParquetFile(f).metadata
        for rg in range(meta.num_row_groups):
            for c in range(meta.num_columns):
                col = meta.row_group(rg).column(c)
                sizes[col.path_in_schema] = sizes.get(col.path_in_schema, 0) + col.total_compressed_size
    return dict(sorted(sizes.items(), key=lambda kv: -kv[1]))


def _print_column_bytes(files: list[Path], rows: int, what: str) -> None:
    from rich.console import Console
    from rich.table import Table

    meta = pq.ParquetFile(files[0]).metadata.row_group(0)
    encodings = {meta.column(c).path_in_schema: "+".join(e for e in meta.column(c).encodings if e != "RLE")
                 for c in range(meta.num_columns)}
    table = Table(title=f"lake gpu_samples bytes per column ({what}, {rows:,} rows, {len(files)} files)")
    for col in ("column", "B per row", "encodings"):
        table.add_column(col, justify="right" if col == "B per row" else "left")
    for name, size in column_bytes(files).items():
        table.add_row(name, f"{size / rows:.3f}", encodings.get(name, ""))
    Console(width=180).print(table)


def storage_figures(ctx: BenchContext, lake: Path) -> list[Figure]:
    from joulehouse.collectors.writer import write_dataset

    hosts = sorted(p.name.removeprefix("host=") for p in (lake / "gpu_samples").glob("date=*/host=*"))
    if ctx.quick:  # a 1-hour slice of one host, written as the collector's writer writes it
        what = "1 host-hour, 8 GPUs"
        part, _ = _host_day(lake, hosts[0], 1.0)
        write_dataset(ctx.work_dir / "slice-lake", "gpu_samples", part)
        lake, hosts = ctx.work_dir / "slice-lake", hosts[:1]
    else:
        what = f"fleet-day, {len(hosts)} hosts x {GPUS_PER_HOST} GPUs"
    files = sorted((lake / "gpu_samples").rglob("*.parquet"))
    lake_bytes = sum(f.stat().st_size for f in files)
    # Prometheus gets the rows as the lake stores them: the same samples, the same values.
    per_host = [_host_day(lake, host, None)[0] for host in hosts]
    n = sum(t.num_rows for t in per_host)
    _print_column_bytes(files, n, what)
    work = ctx.work_dir / "tsdb"
    work.mkdir()
    prom_bytes, values = tsdb_bytes(per_host, work, parallel=min(len(per_host), max(1, (os.cpu_count() or 1))))
    metrics = len(metric_columns(per_host[0]))
    return [
        Figure(SECTION, f"lake bytes per GPU-sample ({what}, {n:,} samples, {metrics} metrics)",
               lake_bytes / n, "B", "Prometheus TSDB blocks", prom_bytes / n, "ratio <= 0.5"),
        Figure(SECTION, f"lake bytes per metric value ({what}, {values:,} values)", lake_bytes / values, "B",
               "Prometheus TSDB blocks", prom_bytes / values, "ratio <= 0.5"),
    ]


def run(ctx: BenchContext) -> list[Figure]:
    figures = cpu_figures(ctx)
    lake = _simulate(ctx, GPUS_PER_HOST if ctx.quick else 4 * GPUS_PER_HOST)
    host_day, _ = _host_day(lake, "node-01", 1.0 if ctx.quick else None)
    figures += writer_figures(ctx, host_day)
    figures += compaction_figures(ctx, host_day)
    figures += storage_figures(ctx, lake)
    return figures
