"""`joulehouse carbon estimate`: the carbon of a past or planned run, without telemetry.

A table on a terminal, JSON when piped (or `--format json|csv`): energy_kwh (at the meter),
operational_tco2e, embodied_tco2e, total_tco2e, method. `--gpu-model NAME --gpus N --days D` is
enough: power from the GPU catalogue, grid intensity, PUE and embodied carbon from the settings.
Exit code 2 with a one-line message on bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.estimate_command import estimate_command
from joulehouse.cli.options import fail, quoted
from joulehouse.cli.run_options import (DEFAULT_DATA_DIR, DataDir, GpusPerServer, LifetimeYears, Start, parse_start,
                                        run_hourly_mean, within)

carbon_app = typer.Typer(no_args_is_help=True, help="Carbon accounting (GHG Protocol scope 2 + embodied).")

# The table's rows: key, words, unit.
CARBON_ROWS = (("gpu_hours", "GPU-hours", "GPU-h"), ("avg_power_w", "average power per GPU", "W"),
               ("it_energy_kwh", "IT energy (GPUs)", "kWh"), ("energy_kwh", "energy at the meter (x PUE)", "kWh"),
               ("grid_gco2e_per_kwh", "grid intensity", "gCO2e/kWh"), ("operational_tco2e", "operational carbon", "tCO2e"),
               ("embodied_tco2e", "embodied carbon (manufacturing share)", "tCO2e"),
               ("total_tco2e", "total carbon", "tCO2e"))


@estimate_command(carbon_app, "carbon", "carbon", CARBON_ROWS,
                  gpu_model_default_of="--embodied-kgco2e-per-gpu (its manufacturing footprint)")
def estimate(
    carbon, run, spec, extra: dict, /,
    grid_gco2e_per_kwh: Optional[float] = typer.Option(
        None, help="Flat grid intensity, gCO2e/kWh (default: \\[carbon] default_grid_gco2e_per_kwh)."),
    region: Optional[str] = typer.Option(None, help="Use the hourly intensity file of this region (FR, CAISO_NORTH...)."),
    start: Start = None,
    grid_file: Optional[Path] = typer.Option(None, help="An intensity file (any supported format) for --region."),
    data_dir: DataDir = None,
    embodied_kgco2e_per_gpu: Optional[float] = typer.Option(
        None, help="Manufacturing footprint per GPU, kgCO2e (default: the model's, else \\[carbon] embodied_kgco2e_per_gpu)."),
    embodied_kgco2e_per_server: Optional[float] = typer.Option(
        None, help="Per server without GPUs, kgCO2e (default: \\[carbon] embodied_kgco2e_per_server)."),
    gpus_per_server: GpusPerServer = None,
    lifetime_years: LifetimeYears = None,
) -> dict:
    """Estimate a run's carbon: operational (energy x PUE x grid intensity) + amortised embodied.

    Example: joulehouse carbon estimate --gpu-model H100-SXM --gpus 8 --days 30
    """
    from joulehouse.reports.accounts.embodied import default_gpu_embodied_kgco2e
    from joulehouse.reports.accounts.estimate import estimate_carbon
    from joulehouse.reports.accounts.grid import GridFileError, intensity_for_region
    from joulehouse.reports.accounts.settings import EmbodiedKg, GramsPerKwh, parse_model_overrides
    from joulehouse.reports.accounts.settings import LifetimeYears as Lifetime

    grid_gco2e_per_kwh = within("--grid-gco2e-per-kwh", grid_gco2e_per_kwh, GramsPerKwh)
    embodied_kgco2e_per_gpu = within("--embodied-kgco2e-per-gpu", embodied_kgco2e_per_gpu, EmbodiedKg)
    embodied_kgco2e_per_server = within("--embodied-kgco2e-per-server", embodied_kgco2e_per_server, EmbodiedKg)
    lifetime_years = within("--lifetime-years", lifetime_years, Lifetime)

    started = parse_start(start) if start is not None else None  # a bad date before any file is opened
    if region is None and (start is not None or grid_file is not None):
        # they choose the hours of a region's grid: alone, they were dropped without a word
        fail("--start and --grid-file read a region's hourly grid: give --region too")
    if grid_gco2e_per_kwh is not None and region is not None:
        fail("give either --grid-gco2e-per-kwh or --region/--start, not both")
    if grid_gco2e_per_kwh is not None:
        intensity, source = grid_gco2e_per_kwh, f"flat {grid_gco2e_per_kwh:g} gCO2e/kWh"
    elif region is not None:
        if start is None or run.hours is None:
            fail("--region needs --start and --hours or --days (the run's wall-clock time)")
        try:
            # the flag, else the site's [carbon] grid_file, else the region's reference file under --data-dir
            given = grid_file or (carbon.grid_file if data_dir is None else "")
            # the site's file is its [carbon] region's: another --region gets its reference file, not
            # the site's hours relabelled (France's 63 g/kWh had been CAISO's)
            series, sentence = intensity_for_region(region, str(given or ""), data_dir or DEFAULT_DATA_DIR,
                                                    basis=carbon.grid_intensity_basis,
                                                    setting="--grid-file" if grid_file else "[carbon] grid_file",
                                                    grid_file_region=None if grid_file else carbon.region)
        except GridFileError as exc:
            fail(f"{exc} (give --grid-file, --data-dir, or [carbon] grid_file in --config)")
        if series.height == 0:
            fail(f"no hourly intensity for region {quoted(region)}: give --grid-file or --grid-gco2e-per-kwh")
        intensity, counts = run_hourly_mean(series, "intensity_gco2e_per_kwh", started, run.hours, sentence)
        source = f"hourly mean {intensity:.2f} gCO2e/kWh from {sentence}, year-mapped"
        extra["intensity_rule_counts"] = counts
    else:
        intensity = carbon.default_grid_gco2e_per_kwh
        source = f"flat {intensity:g} gCO2e/kWh, [carbon] default_grid_gco2e_per_kwh"
    try:
        gpu_kg = embodied_kgco2e_per_gpu if embodied_kgco2e_per_gpu is not None else default_gpu_embodied_kgco2e(
            spec.gpu_model if spec else None, carbon.embodied_kgco2e_per_gpu,
            parse_model_overrides(carbon.embodied_kgco2e_by_gpu_model))
        result = estimate_carbon(run, intensity, gpu_kg,
                                 carbon.embodied_kgco2e_per_server if embodied_kgco2e_per_server is None
                                 else embodied_kgco2e_per_server,
                                 carbon.gpus_per_server if gpus_per_server is None else gpus_per_server,
                                 carbon.lifetime_years if lifetime_years is None else lifetime_years, source)
    except ValueError as exc:
        fail(str(exc))
    return result


def register(app: typer.Typer) -> None:
    """Add `carbon` (with `estimate`) to the main app."""
    app.add_typer(carbon_app, name="carbon")
