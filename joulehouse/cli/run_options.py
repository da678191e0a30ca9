"""What `joulehouse carbon estimate` and `joulehouse tco estimate` both ask of a run: its size
(GPUs x hours, or GPU-hours), average power, PUE, start, and the hardware's lifetime, each with
the one-line refusal of a bad value."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Annotated, Optional

import typer

from joulehouse.cli import SHARED_DATA
from joulehouse.cli.options import CONFIG_DEFAULT, config_origin, fail, quoted, settings_file
from joulehouse.collectors.settings import MAX_PUE

DEFAULT_DATA_DIR = SHARED_DATA
# A planning horizon of at most 100 years on at most ten million GPUs: every figure of an estimate
# stays finite (--days 1e308 made gpu_hours inf and the cost per GPU-hour NaN, printed with exit 0).
MAX_HORIZON_YEARS = 100
MAX_HOURS = MAX_HORIZON_YEARS * 8766  # 365.25 days a year
MAX_DAYS = MAX_HOURS // 24
MAX_GPUS = 10_000_000
MAX_GPU_HOURS = MAX_GPUS * MAX_HOURS
HORIZON = f"a planning horizon of at most {MAX_HORIZON_YEARS} years"
# No GPU draws 10 kW (the largest TDP is about 1.4 kW), no facility spends 10x its IT power: with the
# bounds above, the energy stays below 1e15 kWh.
MAX_AVG_POWER_W = 10_000
# Capital and embodied carbon are spread over the share of the hardware's life in use: below 1% a
# GPU-hour carries 100x its share (and at 1e-300, Infinity).
MIN_UTILIZATION = 0.01

Gpus = Annotated[Optional[int], typer.Option(help=f"Number of GPUs running together (at most {MAX_GPUS:,}).")]
Hours = Annotated[Optional[float], typer.Option(help=f"Wall-clock hours of the run (at most {MAX_HOURS:,}: {HORIZON}).")]
GpuHours = Annotated[Optional[float], typer.Option(
    help=f"Total GPU-hours (instead of --gpus x --hours; at most {MAX_GPU_HOURS:.4g}: {MAX_GPUS:,} GPUs over {HORIZON}).")]
AvgPowerW = Annotated[Optional[float], typer.Option(
    help=f"Average power per GPU, W (at most {MAX_AVG_POWER_W:,}; default: the TDP of --gpu-model).")]
Pue = Annotated[Optional[float], typer.Option(help=f"Power usage effectiveness of the facility, facility / IT power (1 to {MAX_PUE}; default: the command's section's default_pue, \\[carbon] or \\[tco]).")]
Start = Annotated[Optional[str], typer.Option(help="Run start (ISO-8601, UTC if no offset), for hourly data.")]
DataDir = Annotated[Optional[Path], typer.Option(
    help="Reference data folder (grid/, prices/); default: the settings' files, else ../shared/data beside the checkout.")]
GpusPerServer = Annotated[Optional[int], typer.Option(help="GPUs sharing one server, its footprint and price (default: settings, 8).")]
LifetimeYears = Annotated[Optional[float], typer.Option(help="Amortisation period of the hardware, years (default: settings, 5).")]
Utilization = Annotated[float, typer.Option(help=f"Share of the hardware's life it is in use ({MIN_UTILIZATION} to 1).")]


def refuse_non_finite(options: dict) -> None:
    """Fail naming the first float option given as nan or inf: click reads both as numbers, and
    they would come out as NaN (not JSON) or inf in every figure of the estimate."""
    for name, value in options.items():
        if isinstance(value, float) and not math.isfinite(value):
            fail(f"--{name.replace('_', '-')} {value}: expected a finite number")


def within(flag: str, value: Optional[float], bounded) -> Optional[float]:
    """`value` of `flag` (None: not given) checked against a settings type's range, the one its
    setting has (reports.accounts.settings: prices, intensities, capital...), or fail naming the flag."""
    if value is None:
        return None
    import pydantic

    try:
        return pydantic.TypeAdapter(bounded).validate_python(value)
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        limits = error.get("ctx", {})
        if "le" in limits:
            fail(f"{flag} {value:g}: expected at most {limits['le']:,g}")
        if "ge" in limits:
            fail(f"{flag} {value:g}: expected at least {limits['ge']:g}")
        fail(f"{flag} {value:g}: {error['msg']}")


def run_shape(gpus: Optional[int], hours: Optional[float], gpu_hours: Optional[float], avg_power_w: float,
              pue: float, utilization: float):
    """Build a RunShape from --gpus/--hours or --gpu-hours, failing with one clear line."""
    from joulehouse.reports.accounts.estimate import RunShape

    for flag, value, most, why in (
            ("--gpus", gpus, MAX_GPUS, "a fleet larger than any"), ("--hours", hours, MAX_HOURS, HORIZON),
            ("--gpu-hours", gpu_hours, MAX_GPU_HOURS, f"{MAX_GPUS:,} GPUs over {HORIZON}"),
            ("--avg-power-w", avg_power_w, MAX_AVG_POWER_W, "W per GPU"), ("--pue", pue, MAX_PUE, "facility / IT power")):
        if value is not None and value <= 0:
            fail(f"{flag} {value}: expected a positive number")
        if value is not None and value > most:
            fail(f"{flag} {value:g}: expected at most {most:,} ({why})" if isinstance(value, float) else
                 f"{flag} {value}: expected at most {most:,} ({why})")
    if not MIN_UTILIZATION <= utilization <= 1:
        fail(f"--utilization {utilization:g}: expected {MIN_UTILIZATION} to 1 (the share of the hardware's life in use)")
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
        fail(f"--start {quoted(start)}: expected an ISO-8601 time such as 2026-03-02T00:00Z")
    value = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    try:  # a run as long as the longest taken, and the week either side the year mapping reads
        value + dt.timedelta(days=MAX_DAYS + 8), value - dt.timedelta(days=8)
    except OverflowError:
        fail(f"--start {quoted(start)}: a run from then ends outside the calendar (years 1 to 9999); "
             "expected a time such as 2026-03-02T00:00Z")
    return value




def gpu_model_option(also_default_of: str = ""):
    """The --gpu-model option of an estimate; `also_default_of` names what else it is the default of
    (carbon: the embodied footprint; the cost's help had said so too, where it prices nothing)."""
    also = f", and the default {also_default_of}" if also_default_of else ""
    return Annotated[Optional[str], typer.Option(
        "--gpu-model", help="A GPU model of the catalogue (H100-SXM, H200, A100-SXM4-80GB, L40S...): its TDP is the "
                            f"default --avg-power-w (an upper bound: a busy GPU draws less){also}.")]


Days = Annotated[Optional[float], typer.Option(help=f"Wall-clock days of the run (instead of --hours; at most {MAX_DAYS:,}: {HORIZON}).")]
Config = Annotated[Optional[Path], typer.Option(
    "--config", help=f"Settings file (TOML): the defaults for grid, PUE, prices, capital and lifetime ({CONFIG_DEFAULT}).")]


def account_settings(config: Optional[Path]):
    """The joulehouse settings whose [carbon] and [tco] sections give the estimates' defaults."""
    from joulehouse.settings import SettingsError, load_settings

    try:
        return load_settings(settings_file(config))
    except SettingsError as exc:
        fail(f"{exc}{config_origin(config)}")


def run_hourly_mean(series, column: str, started, hours: float, source: str) -> tuple[float, dict[str, int]]:
    """The run's mean of an hourly series (reports.accounts.estimate.hourly_mean) and its rule
    counts, or fail naming `source` where the series cannot give some of the run's hours: an
    unknown hour is never a 0 (a night run had read 0 gCO2e, a free hour)."""
    from joulehouse.reports.accounts.estimate import hourly_mean

    try:
        return hourly_mean(series, column, started, hours, None)
    except ValueError as exc:
        fail(f"{exc}: {source}")


def catalogue_model(gpu_model: Optional[str]):
    """The catalogue row of --gpu-model (None without it), or fail listing what the catalogue knows."""
    if gpu_model is None:
        return None
    import re

    from joulehouse.models.gpu_catalogue import CatalogueError, catalogue, lookup

    if not gpu_model.strip():
        # an empty name is the start of every name: it was the family of all the catalogue's models
        fail(f"--gpu-model {quoted(gpu_model)}: expected a GPU model name (H100-SXM, H200, A100-SXM4-80GB, L40S...)")

    try:
        return lookup(gpu_model)
    except CatalogueError:
        # A short name ("H100", "A100") names a family: one member is the answer, several a question.
        # Failing a whole word, the start of one ("A100-SXM" of A100-SXM4-40GB and -80GB): it was
        # refused as unknown, with a list of names that did not say which two it meant.
        name = re.escape(" ".join(gpu_model.split()).casefold())
        family = []
        for ending in (r"(?![a-z0-9])", ""):
            word = re.compile(rf"(?<![a-z0-9]){name}{ending}")
            family = family or [spec for spec in catalogue() if word.search(spec.gpu_model.casefold())]
        if len(family) == 1:
            return family[0]
        if family:
            fail(f"--gpu-model {quoted(gpu_model)} could be {', '.join(repr(s.gpu_model) for s in family)}: say which")
        fail(f"--gpu-model {quoted(gpu_model)} is not in the catalogue (models/gpu_catalogue.csv); known: "
             f"{', '.join(s.gpu_model for s in catalogue())}")


def run_hours(hours: Optional[float], days: Optional[float]) -> Optional[float]:
    """--hours, or --days x 24; not both."""
    if days is None:
        return hours
    if hours is not None:
        fail("give --hours or --days, not both")
    if days <= 0:
        fail(f"--days {days:g}: expected a positive number")
    if days > MAX_DAYS:
        fail(f"--days {days:g}: expected at most {MAX_DAYS:,} ({HORIZON})")
    return days * 24.0


def average_power_w(avg_power_w: Optional[float], spec) -> tuple[float, str]:
    """(W per GPU, where it came from): --avg-power-w, else the catalogue's TDP of --gpu-model."""
    if avg_power_w is not None:
        return avg_power_w, "--avg-power-w"
    if spec is None:
        fail("give --avg-power-w W, or --gpu-model NAME for its TDP")
    return spec.tdp_w, f"TDP of {spec.gpu_model} (catalogue)"


def planned_run(section, gpu_model: Optional[str], gpus: Optional[int], hours: Optional[float], days: Optional[float],
                gpu_hours: Optional[float], avg_power_w: Optional[float], pue: Optional[float], utilization: float):
    """(RunShape, catalogue row or None, where the power came from) of an estimate's options, the
    PUE defaulting to `section`'s ([carbon] or [tco] settings)."""
    spec = catalogue_model(gpu_model)
    power_w, power_from = average_power_w(avg_power_w, spec)
    run = run_shape(gpus, run_hours(hours, days), gpu_hours, power_w, section.default_pue if pue is None else pue,
                    utilization)
    return run, spec, power_from


def with_run(result: dict, run, spec, power_from: str, extra: dict) -> tuple[dict, str]:
    """An estimate's document with the power it assumed and the model, and the table's title subject."""
    result = {**result, "avg_power_w": run.avg_power_w, "avg_power_from": power_from,
              **({"gpu_model": spec.gpu_model} if spec else {}), **extra}
    return result, (f"{run.gpus} x {spec.gpu_model}" if spec and run.gpus else f"{run.gpu_hours:,.0f} GPU-hours")
