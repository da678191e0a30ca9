"""`joulehouse carbon estimate`: the carbon of a past or planned run, without telemetry.

Prints JSON: energy_kwh (at the meter), operational_tco2e, embodied_tco2e, total_tco2e, method.
Exit code 2 with a one-line message on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.options import fail
from joulehouse.cli.run_options import (DEFAULT_DATA_DIR, AvgPowerW, DataDir, GpuHours, Gpus, GpusPerServer, Hours,
                                         LifetimeYears, Pue, Start, Utilization, parse_start, run_shape)

carbon_app = typer.Typer(no_args_is_help=True, help="Carbon accounting (GHG Protocol scope 2 + embodied).")


@carbon_app.command("estimate")
def estimate(
    gpus: Gpus = None,
    hours: Hours = None,
    gpu_hours: GpuHours = None,
    avg_power_w: AvgPowerW = ...,
    pue: Pue = 1.3,
    grid_gco2e_per_kwh: Optional[float] = typer.Option(None, help="Flat grid intensity, gCO2e/kWh."),
    region: Optional[str] = typer.Option(None, help="Use the hourly intensity file of this region (FR, CAISO_NORTH...)."),
    start: Start = None,
    grid_file: Optional[Path] = typer.Option(None, help="An intensity file (any supported format) for --region."),
    data_dir: DataDir = DEFAULT_DATA_DIR,
    embodied_kgco2e_per_gpu: float = typer.Option(150.0, help="Manufacturing footprint per GPU, kgCO2e."),
    embodied_kgco2e_per_server: float = typer.Option(2750.0, help="Per server without GPUs, kgCO2e."),
    gpus_per_server: GpusPerServer = 8,
    lifetime_years: LifetimeYears = 5.0,
    utilization: Utilization = 1.0,
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
