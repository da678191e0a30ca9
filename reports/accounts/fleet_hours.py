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
"""

from __future__ import annotations

import datetime as dt

import polars as pl

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
