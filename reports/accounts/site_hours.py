"""The hourly context of an accounted day (grid intensity, price, the fleet's load per site and
hour) and the time-shifting rows built on it (pure, frame in, frame out; carbon_day and tco_day
write them).

Every UTC hour of the day gets a row per (site, region) seen in the day's GPU-hours, metered or
not: the curves are drawn over the whole day. Fleet energies are NULL in hours with no metered
GPU-hour (a missing reading is NULL, never 0).
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from joulehouse.reports.accounts.attribution import UNALLOCATED, attribute_gpu_hours
from joulehouse.reports.accounts.shift import plan_shifts, shift_inputs

HOUR = pl.Datetime("us", "UTC")


def day_site_hours(gpu_hours: pl.DataFrame, day: dt.date) -> pl.DataFrame:
    """(hour_at, day, site, region): the day's 24 UTC hours for each (site, region) present."""
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    hours = pl.DataFrame({"hour_at": [start + dt.timedelta(hours=h) for h in range(24)]},
                         schema={"hour_at": HOUR}).with_columns(pl.lit(day).alias("day"))
    sites = gpu_hours.select("site", "region").unique().sort("site", "region")
    return hours.join(sites, how="cross")


def fleet_load(gpu_hours: pl.DataFrame) -> pl.DataFrame:
    """Per (site, hour_at): fleet_it_energy_kwh, fleet_gpu_energy_kwh, fleet_facility_energy_kwh
    (kWh; gpu_hours needs energy_kwh [IT], gpu_energy_kwh [board] and pue)."""
    return gpu_hours.group_by("site", "hour_at").agg(
        pl.col("energy_kwh").sum().alias("fleet_it_energy_kwh"),
        pl.col("gpu_energy_kwh").sum().alias("fleet_gpu_energy_kwh"),
        (pl.col("energy_kwh") * pl.col("pue")).sum().alias("fleet_facility_energy_kwh"),
    )


def grid_context(site_hours: pl.DataFrame, gpu_hours: pl.DataFrame) -> pl.DataFrame:
    """rpt_context_grid_hourly rows. site_hours: day_site_hours with pue, intensity_gco2e_per_kwh,
    renewable_pct, intensity_rule attached; gpu_hours: the day's GPU-hours with pue."""
    return site_hours.join(fleet_load(gpu_hours), on=["site", "hour_at"], how="left").select(
        "hour_at", "day", "site", "region", "intensity_gco2e_per_kwh", "renewable_pct", "intensity_rule", "pue",
        "fleet_it_energy_kwh", "fleet_gpu_energy_kwh", "fleet_facility_energy_kwh",
    ).sort("site", "hour_at")


def price_context(site_hours: pl.DataFrame, prices: pl.DataFrame, price_rule: str, gpu_hours: pl.DataFrame) -> pl.DataFrame:
    """rpt_context_price_hourly rows. prices: (hour_at, price_usd_per_kwh); gpu_hours with pue."""
    return (
        site_hours.join(prices, on="hour_at", how="left")
        .join(fleet_load(gpu_hours), on=["site", "hour_at"], how="left")
        .select("hour_at", "day", "site", "region", (pl.col("price_usd_per_kwh") * 1000.0).alias("price_usd_per_mwh"),
                pl.lit(price_rule).alias("price_rule"), "fleet_it_energy_kwh", "fleet_facility_energy_kwh")
        .sort("site", "hour_at")
    )


def shift_rows(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, values: pl.DataFrame, window_hours: int) -> pl.DataFrame:
    """Plan the day's deferrable jobs (jobs.deferrable true) against `values` (site, hour_at,
    value_per_kwh per IT kWh) -> plan_shifts' rows plus `day`. gpu_hours: hour_at, day,
    gpu_uuid, site, energy_kwh [IT]."""
    day = gpu_hours["day"][0] if gpu_hours.height else None
    deferrable = jobs.filter(pl.col("deferrable").fill_null(False))["job_id"].unique().to_list() if "deferrable" in jobs.columns else []
    if not deferrable or gpu_hours.height == 0:
        return plan_shifts(*_empty_shift_inputs(), values.head(0)).with_columns(pl.lit(day, dtype=pl.Date).alias("day"))
    attributed = attribute_gpu_hours(gpu_hours.select("hour_at", "day", "gpu_uuid", "energy_kwh"), jobs, ["energy_kwh"])
    usage, idle = shift_inputs(attributed, gpu_hours.select("gpu_uuid", "site"), deferrable, UNALLOCATED)
    return plan_shifts(usage, idle, values, window_hours).with_columns(pl.lit(day, dtype=pl.Date).alias("day"))


def _empty_shift_inputs() -> tuple[pl.DataFrame, pl.DataFrame]:
    usage = pl.DataFrame(schema={"site": pl.String, "hour_at": HOUR, "team": pl.String, "job_id": pl.String,
                                 "gpu_hours": pl.Float64, "energy_kwh": pl.Float64})
    idle = pl.DataFrame(schema={"site": pl.String, "hour_at": HOUR, "idle_gpu_hours": pl.Float64})
    return usage, idle


def carbon_shift_rows(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, grid: pl.DataFrame, window_hours: int) -> pl.DataFrame:
    """rpt_shift_carbon_daily rows: plan against PUE x intensity (gCO2e per IT kWh) of `grid`
    (rpt_context_grid_hourly rows)."""
    values = grid.select("site", "hour_at", (pl.col("pue") * pl.col("intensity_gco2e_per_kwh")).alias("value_per_kwh"))
    return shift_rows(gpu_hours, jobs, values, window_hours).select(
        "day", "site", "team", "job_id", "energy_kwh", "gpu_hours", pl.col("as_run").alias("carbon_gco2e"),
        pl.col("planned").alias("shifted_carbon_gco2e"), pl.col("saving").alias("carbon_saving_gco2e"),
        "moved_gpu_hours", pl.col("best_hour_at").alias("best_carbon_hour_at"))


def cost_shift_rows(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, site_pue: pl.DataFrame, prices: pl.DataFrame,
                    window_hours: int) -> pl.DataFrame:
    """rpt_shift_cost_daily rows: plan against PUE x price (USD per IT kWh). site_pue: (site,
    hour_at, pue) for every hour of the day; prices: (hour_at, price_usd_per_kwh)."""
    values = site_pue.join(prices, on="hour_at", how="left").select(
        "site", "hour_at", (pl.col("pue") * pl.col("price_usd_per_kwh")).alias("value_per_kwh"))
    return shift_rows(gpu_hours, jobs, values, window_hours).select(
        "day", "site", "team", "job_id", "energy_kwh", "gpu_hours", pl.col("as_run").alias("energy_cost_usd"),
        pl.col("planned").alias("shifted_energy_cost_usd"), pl.col("saving").alias("cost_saving_usd"),
        "moved_gpu_hours", pl.col("best_hour_at").alias("best_cost_hour_at"))
