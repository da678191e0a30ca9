"""Planning estimates without telemetry: carbon and cost of a past or planned run.

Energy at the meter, kWh = GPU-hours x average GPU power (kW) x PUE (the method Patterson et
al. 2021 use: GPU power only, facility overhead through PUE; CPU/host power is not included
unless folded into the average power given).
Operational carbon = energy at the meter x grid intensity (flat, or hourly from a file over the
run's wall-clock hours, all GPUs running together).
Embodied carbon = GPU-hours x amortised (GPU + server share) per hour / utilization: a fleet
used 50% of its life must recover twice the embodied carbon per used hour.
Cost = energy at the meter x price + demand charge + capital and operations amortised per
GPU-hour / utilization. The demand charge is the daily accounts' own (reports.accounts.demand,
allocated_demand_charge): the run's hourly kW at the meter (GPUs x power x PUE, the share of each
hour it runs), each day charged what it adds to its month's peak, so a run costs rate x its peak
once in every calendar month it touches (the tariff's local months), as the utility bills it and the accounts would charge it
for the same hourly power (a time pro rata, hours / 730, undercharged every run shorter than a
month). Without a start the run is placed from NOMINAL_START.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from zoneinfo import ZoneInfo

import polars as pl

from joulehouse.reports.accounts.demand import NO_METER, allocated_demand_charge
from joulehouse.reports.accounts.embodied import HOURS_PER_YEAR, capital_usd_per_gpu_hour, embodied_gco2e_per_gpu_hour
from joulehouse.reports.accounts.yearmap import map_to_target_hours, rule_counts

# A run without a start begins at a month's first hour (00:00 on 1 January where the tariff bills,
# nominal_start): a run of up to 31 days then falls in one monthly demand bill, the fewest it can (a
# lower bound), as a sliding pro rata would pretend of any run; a longer one in the months it would
# from 1 January.
NOMINAL_START = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def nominal_start(timezone: str = "UTC") -> dt.datetime:
    """NOMINAL_START's wall time in the tariff's zone, as UTC: 1 January's first local hour (from
    00:00 UTC, a New York run's first five hours were December's, a second demand bill)."""
    return NOMINAL_START.replace(tzinfo=ZoneInfo(timezone)).astimezone(dt.timezone.utc)


@dataclass(frozen=True)
class RunShape:
    """What ran: GPU count and wall-clock hours (or only total GPU-hours), power, PUE, utilization."""

    gpu_hours: float
    avg_power_w: float
    pue: float
    gpus: int | None = None
    hours: float | None = None
    utilization: float = 1.0

    def __post_init__(self) -> None:
        for name in ("gpu_hours", "avg_power_w", "pue", "utilization"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}={getattr(self, name)}: expected a positive number")
        if self.pue < 1.0:
            raise ValueError(f"pue={self.pue}: expected >= 1 (facility energy cannot be below IT energy)")
        if self.utilization > 1.0:
            raise ValueError(f"utilization={self.utilization}: expected a fraction in (0, 1]")

    @property
    def it_energy_kwh(self) -> float:
        return self.gpu_hours * self.avg_power_w / 1000.0

    @property
    def energy_kwh(self) -> float:
        """Energy at the meter, kWh (IT x PUE)."""
        return self.it_energy_kwh * self.pue


def run_hour_overlaps(start: dt.datetime, hours: float) -> pl.DataFrame:
    """(hour_at, overlap_h): each UTC hour a run of `hours` from `start` touches, with the hours of
    it the run spends there (a run from 10:30 for 1 h: half of 10:00, half of 11:00)."""
    start = start.astimezone(dt.timezone.utc)
    end = start + dt.timedelta(hours=hours)
    first = start.replace(minute=0, second=0, microsecond=0)
    hour_at = pl.datetime_range(first, end, "1h", time_zone="UTC", eager=True, closed="left").dt.cast_time_unit("us")
    return pl.DataFrame({"hour_at": hour_at}).with_columns(
        ((pl.min_horizontal(pl.col("hour_at") + pl.duration(hours=1), pl.lit(end))
          - pl.max_horizontal(pl.col("hour_at"), pl.lit(start))).dt.total_microseconds() / 3.6e9).alias("overlap_h"))


def hourly_mean(source: pl.DataFrame, value_col: str, start: dt.datetime, hours: float,
                default: float | None) -> tuple[float, dict[str, int]]:
    """Mean of an hourly series over a run at constant load, each hour weighed by the part of it
    the run spends there, with the year-mapping rule counts (reports.accounts.yearmap). An hour
    the series cannot give (an hour of the day it never holds) takes `default`; None: ValueError
    naming how many, since a mean over unknown hours is unknown (0 had read a night-time run as
    0 gCO2e)."""
    overlaps = run_hour_overlaps(start, hours)
    mapped = map_to_target_hours(source.select("hour_at", value_col), overlaps["hour_at"], [value_col],
                                 {value_col: default})
    unknown = mapped[value_col].null_count()
    if unknown:
        raise ValueError(f"{unknown} of the run's {mapped.height} hours have no {value_col} in the file: it never "
                         "holds those hours of the day (give a file that covers them, or a flat value)")
    return overlap_mean(mapped, value_col, overlaps), rule_counts(mapped)


def overlap_mean(hourly: pl.DataFrame, value_col: str, overlaps: pl.DataFrame) -> float:
    """Mean of `value_col` of `hourly` (hour_at, value_col) over a run, each hour weighed by the
    part of it the run spends there (`overlaps`: run_hour_overlaps)."""
    weighed = hourly.join(overlaps, on="hour_at", how="left")
    return float((weighed[value_col] * weighed["overlap_h"]).sum() / weighed["overlap_h"].sum())


def estimate_carbon(run: RunShape, grid_gco2e_per_kwh: float, embodied_kgco2e_per_gpu: float,
                    embodied_kgco2e_per_server: float, gpus_per_server: int, lifetime_years: float,
                    intensity_source: str) -> dict:
    """tCO2e of a run; returns a JSON-ready dict with the inputs and the method."""
    operational_g = run.energy_kwh * grid_gco2e_per_kwh
    embodied_g = run.gpu_hours * embodied_gco2e_per_gpu_hour(
        embodied_kgco2e_per_gpu, embodied_kgco2e_per_server, gpus_per_server, lifetime_years) / run.utilization
    return {
        "gpu_hours": run.gpu_hours,
        "it_energy_kwh": run.it_energy_kwh,
        "energy_kwh": run.energy_kwh,
        "grid_gco2e_per_kwh": grid_gco2e_per_kwh,
        "operational_tco2e": operational_g / 1e6,
        "embodied_tco2e": embodied_g / 1e6,
        "total_tco2e": (operational_g + embodied_g) / 1e6,
        "method": (
            "energy_kwh = GPU-hours x avg power x PUE (at the meter); operational = energy_kwh x grid intensity "
            f"({intensity_source}); embodied = GPU-hours x (GPU + server/gpus_per_server) kgCO2e / "
            "(lifetime hours) / utilization"
        ),
        "inputs": asdict(run) | {
            "embodied_kgco2e_per_gpu": embodied_kgco2e_per_gpu, "embodied_kgco2e_per_server": embodied_kgco2e_per_server,
            "gpus_per_server": gpus_per_server, "lifetime_years": lifetime_years,
        },
    }


def run_meter_hours(start: dt.datetime, hours: float, kw: float) -> pl.DataFrame:
    """(day, site, hour_at, facility_energy_kwh) of a constant `kw` at the meter from `start` for
    `hours`: each UTC hour it touches, with the energy of the part of the hour it runs."""
    return run_hour_overlaps(start, hours).select(
        pl.col("hour_at").dt.date().alias("day"), pl.lit("run").alias("site"), "hour_at",
        (pl.col("overlap_h") * kw).alias("facility_energy_kwh"))


def demand_charge_of_run(run: RunShape, demand_charge_usd_per_kw_month: float, start: dt.datetime | None,
                         timezone: str = "UTC") -> float | None:
    """USD: the run's demand charge by the accounts' rule (module docstring), the run alone at its
    site; `timezone`: the tariff's, whose local months are billed. None where only GPU-hours are
    known: the peak is GPUs x power, and 192 GPU-hours may be 8 GPUs for a day or 1 for 8 days."""
    if demand_charge_usd_per_kw_month == 0:
        return 0.0
    if run.gpus is None and run.hours is None:
        return None
    gpus = run.gpus if run.gpus is not None else run.gpu_hours / run.hours
    hours = run.hours if run.hours is not None else run.gpu_hours / gpus
    meter = run_meter_hours(start or nominal_start(timezone), hours, gpus * run.avg_power_w / 1000.0 * run.pue)
    charged, _ = allocated_demand_charge(meter, NO_METER, 1.0, {}, demand_charge_usd_per_kw_month, timezone)
    return float(charged["demand_charge_usd"].sum())


def estimate_cost(run: RunShape, price_usd_per_mwh: float, demand_charge_usd_per_kw_month: float,
                  gpu_capex_usd: float, server_capex_usd: float, gpus_per_server: int, lifetime_years: float,
                  operations_ratio_of_capex_per_year: float, price_source: str,
                  start: dt.datetime | None = None, timezone: str = "UTC") -> dict:
    """USD of a run by component; returns a JSON-ready dict with the inputs and the method.
    `start`: when the run starts (the calendar months its demand charge falls in, in `timezone`,
    the tariff's); None: nominal_start(timezone)."""
    energy_usd = run.energy_kwh * price_usd_per_mwh / 1000.0
    demand_usd = demand_charge_of_run(run, demand_charge_usd_per_kw_month, start, timezone)
    capital_per_h = capital_usd_per_gpu_hour(gpu_capex_usd, server_capex_usd, gpus_per_server, lifetime_years)
    capex_per_gpu = gpu_capex_usd + server_capex_usd / gpus_per_server
    capital_usd = run.gpu_hours * capital_per_h / run.utilization
    operations_usd = run.gpu_hours * capex_per_gpu * operations_ratio_of_capex_per_year / HOURS_PER_YEAR / run.utilization
    # the peak unknown: the total is unknown too (a part left out is not a zero)
    total = None if demand_usd is None else energy_usd + demand_usd + capital_usd + operations_usd
    return {
        "gpu_hours": run.gpu_hours,
        "energy_kwh": run.energy_kwh,
        "price_usd_per_mwh": price_usd_per_mwh,
        "energy_cost_usd": energy_usd,
        "demand_charge_usd": demand_usd,
        "capital_usd": capital_usd,
        "operations_usd": operations_usd,
        "total_cost_usd": total,
        "cost_per_gpu_hour_usd": None if total is None else total / run.gpu_hours,
        "method": (
            ("demand charge and total unknown: the run's peak kW needs --gpus or --hours beside --gpu-hours; "
             if demand_usd is None else "") +
            f"energy at the meter x price ({price_source}); demand charge as the daily accounts charge it: the run's "
            "peak kW (GPUs x avg power x PUE) once in every calendar month it touches (from "
            f"{(start or nominal_start(timezone)).isoformat()}); capital straight-line over the lifetime and "
            "operations as a yearly share of capital, per GPU-hour / utilization"
        ),
        "inputs": asdict(run),
    }
