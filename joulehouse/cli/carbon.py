"""`joulehouse carbon estimate`: the carbon of a past or planned run, without telemetry.

Prints JSON: energy_kwh (at the meter), operational_tco2e, embodied_tco2e, total_tco2e, method.
Exit code 2 with a one-line message on bad input.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli import SHARED_DATA
from joulehouse.cli.options import fail

carbon_app = typer.Typer(no_args_is_help=True, help="Carbon accounting (GHG Protocol scope 2 + embodied).")

DEFAULT_DATA_DIR = SHARED_DATA


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
    try:
        value = dt.datetime.fromisoformat(start)
    except ValueError:
        fail(f"--start {start!r}: expected an ISO-8601 time such as 2026-03-02T00:00Z")
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


@carbon_app.command("estimate")
def estimate(
    gpus: Optional[int] = typer.Option(None, help="Number of GPUs running together."),
    hours: Optional[float] = typer.Option(None, help="Wall-clock hours of the run."),
    gpu_hours: Optional[float] = typer.Option(None, help="Total GPU-hours (instead of --gpus x --hours)."),
    avg_power_w: float = typer.Option(..., help="Average power per GPU, W."),
    pue: float = typer.Option(1.3, help="Power usage effectiveness of the facility (>= 1)."),
    grid_gco2e_per_kwh: Optional[float] = typer.Option(None, help="Flat grid intensity, gCO2e/kWh."),
    region: Optional[str] = typer.Option(None, help="Use the hourly intensity file of this region (FR, CAISO_NORTH...)."),
    start: Optional[str] = typer.Option(None, help="Run start (ISO-8601, UTC if no offset), with --region."),
    grid_file: Optional[Path] = typer.Option(None, help="An intensity file (any supported format) for --region."),
    data_dir: Path = typer.Option(DEFAULT_DATA_DIR, help="Reference data folder (grid/, prices/)."),
    embodied_kgco2e_per_gpu: float = typer.Option(150.0, help="Manufacturing footprint per GPU, kgCO2e."),
    embodied_kgco2e_per_server: float = typer.Option(2750.0, help="Per server without GPUs, kgCO2e."),
    gpus_per_server: int = typer.Option(8, help="GPUs sharing one server's footprint."),
    lifetime_years: float = typer.Option(5.0, help="Amortisation period, years."),
    utilization: float = typer.Option(1.0, help="Share of the hardware's life it is in use (0..1]."),
) -> None:
    """Estimate a run's carbon: operational (energy x PUE x intensity) + amortised embodied."""
    from joulehouse.reports.accounts.estimate import estimate_carbon, hourly_mean
    from joulehouse.reports.accounts.grid import GridFileError, intensity_for_region

    run = run_shape(gpus, hours, gpu_hours, avg_power_w, pue, utilization)
    extra: dict = {}
    if grid_gco2e_per_kwh is not None and region is not None:
        fail("give either --grid-gco2e-per-kwh or --region/--start, not both")
    if grid_gco2e_per_kwh is not None:
        if grid_gco2e_per_kwh < 0:
            fail(f"--grid-gco2e-per-kwh {grid_gco2e_per_kwh}: expected >= 0")
        intensity, source = grid_gco2e_per_kwh, f"flat {grid_gco2e_per_kwh} gCO2e/kWh"
    elif region is not None:
        if start is None or run.hours is None:
            fail("--region needs --start and --hours (the run's wall-clock hours)")
        try:
            series, sentence = intensity_for_region(region, str(grid_file or ""), data_dir)
        except GridFileError as exc:
            fail(str(exc))
        if series.height == 0:
            fail(f"no hourly intensity for region {region!r}: give --grid-file or --grid-gco2e-per-kwh")
        intensity, counts = hourly_mean(series, "intensity_gco2e_per_kwh", parse_start(start), run.hours, 0.0)
        source = f"hourly mean {intensity:.2f} gCO2e/kWh from {sentence}, year-mapped"
        extra["intensity_rule_counts"] = counts
    else:
        fail("give --grid-gco2e-per-kwh I, or --region R --start T")
    try:
        result = estimate_carbon(run, intensity, embodied_kgco2e_per_gpu, embodied_kgco2e_per_server,
                                 gpus_per_server, lifetime_years, source)
    except ValueError as exc:
        fail(str(exc))
    typer.echo(json.dumps(result | extra, indent=2, default=str))


def register(app: typer.Typer) -> None:
    """Add `carbon` (with `estimate`) to the main app."""
    app.add_typer(carbon_app, name="carbon")
