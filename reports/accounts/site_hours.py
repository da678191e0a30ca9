"""The hourly context of an accounted day: grid intensity, price and the fleet's load per site
and hour (pure, frame in, frame out; carbon_day and tco_day write them).

Every UTC hour of the day gets a row per (site, region) seen in the day's GPU-hours, metered or
not: the curves are drawn over the whole day. A site has two regions where a GPU outside the
inventory takes `[carbon] region`; each row then carries its own region's GPUs' load. Fleet energies are NULL in hours with no GPU-hour
whose energy was measured (a missing reading is NULL, never 0).
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from joulehouse.reports.accounts.attribution import sum_known

HOUR = pl.Datetime("us", "UTC")


def day_site_hours(gpu_hours: pl.DataFrame, day: dt.date) -> pl.DataFrame:
    """(hour_at, day, site, region): the day's 24 UTC hours for each (site, region) present."""
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    hours = pl.DataFrame({"hour_at": [start + dt.timedelta(hours=h) for h in range(24)]},
                         schema={"hour_at": HOUR}).with_columns(pl.lit(day).alias("day"))
    sites = gpu_hours.select("site", "region").unique().sort("site", "region")
    return hours.join(sites, how="cross")


def fleet_load(gpu_hours: pl.DataFrame) -> pl.DataFrame:
    """Per (site, region, hour_at), the grain of the context rows it joins (by site alone, a site
    whose GPUs are in two regions had each region's row carry both loads): fleet_it_energy_kwh, fleet_gpu_energy_kwh, fleet_facility_energy_kwh
    (kWh; gpu_hours needs energy_kwh [IT], gpu_energy_kwh [board] and pue): the sum of the GPU-hours
    whose energy was measured, NULL in a site-hour where none was (reports.accounts.attribution.sum_known)."""
    return gpu_hours.with_columns((pl.col("energy_kwh") * pl.col("pue")).alias("_facility_kwh")).group_by(
        "site", "region", "hour_at").agg(
        sum_known("energy_kwh").alias("fleet_it_energy_kwh"),
        sum_known("gpu_energy_kwh").alias("fleet_gpu_energy_kwh"),
        sum_known("_facility_kwh").alias("fleet_facility_energy_kwh"),
    )


def grid_context(site_hours: pl.DataFrame, gpu_hours: pl.DataFrame) -> pl.DataFrame:
    """rpt_context_grid_hourly rows. site_hours: day_site_hours with pue, intensity_gco2e_per_kwh,
    renewable_pct, intensity_rule attached; gpu_hours: the day's GPU-hours with pue."""
    return site_hours.join(fleet_load(gpu_hours), on=["site", "region", "hour_at"], how="left").select(
        "hour_at", "day", "site", "region", "intensity_gco2e_per_kwh", "renewable_pct", "intensity_rule", "pue",
        "fleet_it_energy_kwh", "fleet_gpu_energy_kwh", "fleet_facility_energy_kwh",
    ).sort("site", "hour_at")


def price_context(site_hours: pl.DataFrame, prices: pl.DataFrame, price_rule: str, gpu_hours: pl.DataFrame,
                  green_premium_below_renewable_pct: float | None = None) -> pl.DataFrame:
    """rpt_context_price_hourly rows. prices: (hour_at, price_usd_per_kwh); gpu_hours with pue;
    site_hours with renewable_pct where known: green_premium_applies is the green premium's rule
    for the hour (renewable share below the threshold; NULL where the share is unknown)."""
    renewable = pl.col("renewable_pct") if "renewable_pct" in site_hours.columns else pl.lit(None, pl.Float64)
    applies = (renewable < green_premium_below_renewable_pct if green_premium_below_renewable_pct is not None
               else pl.lit(None, pl.Boolean))
    return (
        site_hours.join(prices, on="hour_at", how="left")
        .join(fleet_load(gpu_hours), on=["site", "region", "hour_at"], how="left")
        .select("hour_at", "day", "site", "region", (pl.col("price_usd_per_kwh") * 1000.0).alias("price_usd_per_mwh"),
                pl.lit(price_rule).alias("price_rule"), "fleet_it_energy_kwh", "fleet_facility_energy_kwh",
                applies.alias("green_premium_applies"))
        .sort("site", "hour_at")
    )
