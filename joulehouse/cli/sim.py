"""`joulehouse simulate`: write a simulated fleet (GPU, node, facility, jobs, inventory) into a lake."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Optional

import typer

from joulehouse.cli.options import DAY_RANGE, fail, output_folder, parse_day, parse_duration

MAX_GPUS = 100_000  # a fleet of hundreds of megawatts; the fleet is built in memory before a row is written
MAX_DAYS = 3660  # ten years
# What a simulated reading takes in the lake (warehouse/SCALING.md: 12.9 bytes with every metric),
# rounded up: a lake that would not fit on its disk is refused before hours of writing.
LAKE_BYTES_PER_READING = 14


def register(app: typer.Typer) -> None:
    """Add the `simulate` command to `app`."""

    @app.command("simulate")
    def simulate(
        # str, not Path: Path("s3://b/lake") is "s3:/b/lake", a local folder
        lake: Annotated[str, typer.Option(help="Lake folder or fsspec URL (s3://bucket/lake) to write into "
                                               "(inventory.csv lands beside it).")],
        gpus: Annotated[int, typer.Option(min=1, max=MAX_GPUS, help="GPUs in the fleet (8 per host).")] = 32,
        days: Annotated[int, typer.Option(min=1, max=MAX_DAYS, help="UTC days to simulate.")] = 2,
        start: Annotated[str, typer.Option(help="First UTC day, YYYY-MM-DD.")] = "2026-06-10",
        seed: Annotated[int, typer.Option(help="Random seed: the same seed writes the same rows.")] = 0,
        interval: Annotated[str, typer.Option("--interval", metavar="DURATION",
                                              help="Time between GPU samples: 1s, 500ms, 1m (250 ms to 60 s: a host's day is simulated in memory).")] = "1s",
        interval_s: Annotated[Optional[float], typer.Option("--interval-s", hidden=True)] = None,
    ) -> None:
        """Simulate a GPU fleet and its site and write the lake datasets a collector would write.

        Example: joulehouse simulate --lake var/sim/lake --gpus 16 --days 1 --interval 10s
        """
        from rich.console import Console
        from rich.markup import escape
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.table import Table

        from joulehouse.collectors import lakefs
        from joulehouse.collectors.sim import simulate_fleet
        from joulehouse.collectors.sim.simulate import interval_problem

        console = Console()
        first_day = parse_day(start, "--start")
        if first_day + dt.timedelta(days=days - 1) > DAY_RANGE[1]:  # the last day failed after the first was written
            fail(f"--start {start} --days {days}: the last day would be after {DAY_RANGE[1]}")
        # Before the progress bar: a bad option is one error line, nothing drawn. (--interval-s N: the
        # old spelling, still read.)
        given = f"--interval-s {interval_s:g}" if interval_s is not None else f"--interval {interval}"
        interval_s = interval_s if interval_s is not None else parse_duration(interval, "--interval")
        problem = interval_problem(interval_s)
        if problem:
            fail(f"{given}: {problem}")
        _refuse_a_lake_past_its_disk(lake, gpus * days * round(86400 / interval_s))
        if not lakefs.is_url(lake):
            output_folder(Path(lake), "--lake", "the lake's folder")
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        try:
            with Progress(*columns, console=console) as progress:
                task = progress.add_task(f"simulating {gpus} GPUs x {days} days (GPU-days)", total=gpus * days)

                def on_progress(done: int, total: int) -> None:
                    progress.update(task, completed=done, total=total)

                summary = simulate_fleet(lake, gpus=gpus, days=days, start=first_day, seed=seed,
                                         interval_s=interval_s, progress=on_progress)
        except ValueError as exc:
            fail(str(exc))
        table = Table(title=f"simulated {first_day} + {days} day(s), seed {seed}, into {lake}")
        table.add_column("dataset")
        table.add_column("rows", justify="right")
        for dataset, rows in summary.rows.items():
            table.add_row(dataset, f"{rows:,}")
        console.print(table)
        console.print(escape(f"{summary.files_written} files written; inventory: {summary.inventory_path}"))
        truth = Table(title="true power coefficients (what fitted models should recover)")
        for name in ("gpu_model", "static_w", "static %/10C", "dyn_w", "alpha", "mem_w", "pcie_w_per_gbps"):
            truth.add_column(name)
        for model, t in summary.truth.items():
            truth.add_row(model, f"{t.static_w:.1f}", f"{t.static_pct_per_10c:.1f}", f"{t.dyn_w:.0f}",
                          f"{t.dyn_freq_exponent:g}", f"{t.mem_w:.0f}", f"{t.pcie_w_per_gbps:.2f}")
        console.print(truth)
        for run in summary.cross_model_runs:
            console.print(escape(f"cross-model job {run.job_id}: {run.gpu_model} {run.host} {run.gpu_uuid}"))


def _refuse_a_lake_past_its_disk(lake: str, readings: int) -> None:
    """Fail when a local lake's disk cannot hold the GPU readings about to be simulated."""
    import shutil

    from joulehouse.collectors import lakefs

    if lakefs.is_url(lake):
        return  # an object store's room is not ours to measure
    folder = Path(lake).absolute()
    while not folder.exists():
        folder = folder.parent
    needed, free = readings * LAKE_BYTES_PER_READING, shutil.disk_usage(folder).free
    if needed > free:
        fail(f"{readings:,} GPU readings take about {needed / 1e9:,.1f} GB in the lake; {folder} has "
             f"{free / 1e9:,.1f} GB free: simulate fewer GPUs or days, or a longer --interval", 2)
