"""What `joulehouse carbon estimate` and `joulehouse tco estimate` both ask of a run: its size
(GPUs x hours, or GPU-hours), average power, PUE, start, and the hardware's lifetime, each with
the one-line refusal of a bad value."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Optional

import typer

from joulehouse.cli import SHARED_DATA
from joulehouse.cli.options import fail

DEFAULT_DATA_DIR = SHARED_DATA

Gpus = Annotated[Optional[int], typer.Option(help="Number of GPUs running together.")]
Hours = Annotated[Optional[float], typer.Option(help="Wall-clock hours of the run.")]
GpuHours = Annotated[Optional[float], typer.Option(help="Total GPU-hours (instead of --gpus x --hours).")]
AvgPowerW = Annotated[float, typer.Option(help="Average power per GPU, W.")]
Pue = Annotated[float, typer.Option(help="Power usage effectiveness of the facility (>= 1).")]
Start = Annotated[Optional[str], typer.Option(help="Run start (ISO-8601, UTC if no offset), for hourly data.")]
DataDir = Annotated[Path, typer.Option(help="Reference data folder (grid/, prices/).")]
GpusPerServer = Annotated[int, typer.Option(help="GPUs sharing one server (its footprint, its price).")]
LifetimeYears = Annotated[float, typer.Option(help="Amortisation period of the hardware, years.")]
Utilization = Annotated[float, typer.Option(help="Share of the hardware's life it is in use (0..1].")]


def run_shape(gpus: Optional[int], hours: Optional[float], gpu_hours: Optional[float], avg_power_w: float,
              pue: float, utilization: float):
    """Build a RunShape from --gpus/--hours or --gpu-hours, failing with one clear line."""
    from joulehouse.reports.accounts.estimate import RunShape

    for flag, value in (("--gpus", gpus), ("--hours", hours), ("--gpu-hours", gpu_hours)):
        if value is not None and value <= 0:
            fail(f"{flag} {value}: expected a positive number")
    if gpu_hours is None:
        if gpus is None or hours is None:
            fail("give --gpus N and --hours H, or --gpu-hours X")
        gpu_hours = gpus * hours
    elif gpus is not None and hours is not None and abs(gpus * hours - gpu_hours) > 1e-9 * gpu_hours:
        fail(f"--gpu-hours {gpu_hours} disagrees with --gpus {gpus} x --hours {hours}")
    try:
        return RunShape(gpu_hours=gpu_hours, avg_power_w=avg_power_w, pue=pue, gpus=gpus, hours=hours,
                        utilization=utilization)
    except ValueError as exc:
        fail(str(exc))


def parse_start(start: str) -> dt.datetime:
    """--start as an aware UTC time (a time without offset is UTC), or fail naming it."""
    try:
        value = dt.datetime.fromisoformat(start)
    except ValueError:
        fail(f"--start {start!r}: expected an ISO-8601 time such as 2026-03-02T00:00Z")
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
