"""The GPU-hours of a day's fleet that have no reading (pure, frames in, frame out).

Capital and embodied carbon amortise over calendar time a GPU is in the fleet, not over the hours
a collector happened to record: a GPU whose collector was down half the day was paid for, and
aged, the whole day. So the accounts charge every hour of the day of every GPU in the fleet:

- a GPU the inventory lists (dim_gpu.in_inventory; every dim_gpu row where the relation has no
  such column) is in the fleet from its purchased_on (00:00 UTC) on, or every day without a
  purchase date, until the day before its retired_on (the inventory's optional column: a GPU
  sold or scrapped keeps its row, so re-running its last days still charges them);
- a GPU the inventory does not list, or lists as not yet bought or retired, is in the fleet on a
  day it has a reading (all we know of it).

The hours of those GPUs without a row in fct_gpu_energy_hourly are "unmetered" GPU-hours: they
carry capital, operations and embodied carbon and no energy (NULL, not 0: nothing was read), and
the accounts count them (unmetered_gpu_hours) so the charge is never hidden.

A GPU the inventory gives no site (it does not list the GPU, or lists it without one) is placed at
the warehouse's only metered site where the day's PUE rows are one site's, else at "unknown"
(reports.accounts.warehouse_io). Beside GPUs at known sites (`known_sites`: the inventory's sites
of the day's fleet, the metered ones) "unknown" is no site: its GPUs may stand at any of them, so
it has no facility meter, no utility's bill, no energy contract of its own. `unplaced` marks those
GPU-hours; the accounts keep their energy, carbon and cost in every total and say in a note which
GPUs they are and what each account assumed for them (reports.accounts.carbon, .tco). A fleet that
knows no site at all (no inventory site, no meter: a first install) is one place, "unknown", as
before: its GPUs are not placed elsewhere by anything, and a note says the fleet is taken as one
site (one demand peak, one site's contracts).
"""

from __future__ import annotations

import datetime as dt

import polars as pl

from joulehouse.reports.accounts.attribution import sum_known

HOUR = pl.Datetime("us", "UTC")
FLEET_COLUMNS = {"gpu_uuid": pl.String, "host": pl.String, "gpu_model": pl.String, "in_inventory": pl.Boolean,
                 "purchased_on": pl.Date, "retired_on": pl.Date}


def day_hour_starts(day: dt.date) -> pl.DataFrame:
    """The 24 UTC hour starts of `day`, as a one-column frame `hour_at`."""
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    return pl.DataFrame({"hour_at": [start + dt.timedelta(hours=h) for h in range(24)]},
                        schema={"hour_at": HOUR})


def unmetered_fleet_hours(metered: pl.DataFrame, inventory: pl.DataFrame, day: dt.date) -> pl.DataFrame:
    """metered: the day's GPU-hours (hour_at, gpu_uuid, host, gpu_model); inventory: FLEET_COLUMNS
    (one row per GPU, dim_gpu). Returns (hour_at, day, host, gpu_uuid, gpu_model) for each hour of
    `day` a GPU of the fleet (module docstring) has no metered row."""
    owned = inventory.filter(pl.col("in_inventory").fill_null(True)
                             & (pl.col("purchased_on").is_null() | (pl.col("purchased_on") <= day))
                             & (pl.col("retired_on").is_null() | (pl.col("retired_on") > day)))
    # a GPU outside the inventory: its host and model as its own readings name them
    seen = (metered.sort("hour_at").group_by("gpu_uuid", maintain_order=True)
            .agg(pl.col("host").last(), pl.col("gpu_model").last()))
    # a GPU read that day is in the fleet that day, whatever the inventory's dates say
    fleet = pl.concat([owned.select("gpu_uuid", "host", "gpu_model"),
                       seen.join(owned, on="gpu_uuid", how="anti").select("gpu_uuid", "host", "gpu_model")],
                      how="vertical_relaxed").unique("gpu_uuid", keep="first")
    return (fleet.join(day_hour_starts(day), how="cross")
            .join(metered.select("gpu_uuid", pl.col("hour_at").cast(HOUR)), on=["gpu_uuid", "hour_at"], how="anti")
            .select("hour_at", pl.lit(day, pl.Date).alias("day"), "host", "gpu_uuid", "gpu_model")
            .sort("gpu_uuid", "hour_at"))


def known_sites(metered_sites: list[str], hours: list[pl.DataFrame | None]) -> list[str]:
    """The sites the day's fleet is known at: `metered_sites` (acct_pue_hours') and the inventory's
    sites (inventory_site) of `hours`, the day's GPU-hours read and unread."""
    listed = [frame["inventory_site"] for frame in hours if frame is not None and frame.height]
    return sorted(set(metered_sites) | set(pl.concat(listed).drop_nulls().to_list() if listed else []))


def unplaced(sites: list[str]) -> pl.Expr:
    """Per GPU-hour (columns inventory_site, site): placed at no site (module docstring): the
    inventory names none and the accounts' site is not one of the day's `sites` (known_sites);
    none where the fleet knows no site."""
    if not sites:
        return pl.lit(False)
    return pl.col("inventory_site").is_null() & ~pl.col("site").is_in(sites)


def siteless_fleet_note(sites: list[str], hours: list[pl.DataFrame | None]) -> list[str]:
    """A note where the day's fleet (`hours`) knows no site (`sites`, known_sites, empty)."""
    if sites or not any(frame is not None and frame.height for frame in hours):
        return []
    return ["no GPU of the day's fleet has a site (no inventory site, no facility meter): the accounts take the "
            "whole fleet as one site, 'unknown' (one demand peak on its IT x PUE, one site's energy contracts); "
            "an inventory with each GPU's site accounts each site on its own"]


def unplaced_gpus(hours: list[pl.DataFrame | None], sites: list[str]) -> pl.DataFrame:
    """The GPUs placed at no site in `hours` (the day's GPU-hours read, with pue, and unread), one row
    each: gpu_uuid, host, site, gpu_hours, energy_kwh (IT) and facility_energy_kwh (IT x PUE), NULL
    where none of its energy was measured, and purchased_on / purchase_price_usd / embodied_kgco2e
    as the inventory has them (NULL: the settings' defaults were taken)."""
    parts = [frame for frame in hours if frame is not None and frame.height]
    if not parts:
        return pl.DataFrame(schema={"gpu_uuid": pl.String, "host": pl.String, "site": pl.String,
                                    "gpu_hours": pl.Float64, "energy_kwh": pl.Float64,
                                    "facility_energy_kwh": pl.Float64, "purchased_on": pl.Date,
                                    "purchase_price_usd": pl.Float64, "embodied_kgco2e": pl.Float64})
    rows = pl.concat(parts, how="diagonal_relaxed").filter(unplaced(sites))
    energy = pl.col("energy_kwh") if "energy_kwh" in rows.columns else pl.lit(None, pl.Float64)
    pue = pl.col("pue") if "pue" in rows.columns else pl.lit(None, pl.Float64)
    return (rows.with_columns(energy.cast(pl.Float64).alias("energy_kwh"),
                              (energy * pue).cast(pl.Float64).alias("facility_energy_kwh"))
            .group_by("gpu_uuid").agg(pl.col("host", "site").first(), pl.len().cast(pl.Float64).alias("gpu_hours"),
                                      sum_known("energy_kwh"), sum_known("facility_energy_kwh"),
                                      pl.col("purchased_on", "purchase_price_usd", "embodied_kgco2e").first())
            .sort("gpu_uuid"))


def named_gpus(gpus: pl.DataFrame, shown: int = 3) -> str:
    """'GPU-x on node-9, GPU-y on node-9 and 4 more': the first `shown` of unplaced_gpus's rows."""
    names = [f"{uuid} on {host}" for uuid, host in gpus.select("gpu_uuid", "host").head(shown).iter_rows()]
    more = gpus.height - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def unplaced_note(gpus: pl.DataFrame, treatment: str) -> list[str]:
    """The note an account gives where unplaced_gpus found any: which GPUs, their hours and energy
    (in the day's totals all the same), then `treatment`, what the account assumed for them."""
    if not gpus.height:
        return []

    def kwh(column: str) -> str:
        known = gpus[column].drop_nulls()
        return f"{known.sum():.3f} kWh" if known.len() else "unknown (never measured)"

    sites = ", ".join(sorted(map(repr, gpus["site"].unique().to_list())))
    return [f"{gpus.height} GPU(s) the inventory places at no site ({named_gpus(gpus)}; accounted at {sites}, which "
            f"is no site's meter): {gpus['gpu_hours'].sum():g} GPU-hours, {kwh('energy_kwh')} IT, "
            f"{kwh('facility_energy_kwh')} at the meter, in the day's totals; {treatment}"]
