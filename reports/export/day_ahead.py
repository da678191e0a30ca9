"""The next day's electricity prices where they are known the day before, for the placement advice.

A day-ahead market clears the day before delivery: PJM posts its day-ahead LMPs for day D+1 at
about 13:30 Eastern on day D (PJM Manual 11, Energy & Ancillary Services Market Operations, the
day-ahead market timeline). So when the configured price file is a day-ahead file
(`total_lmp_da`) that holds every hour of D+1, and the advice is made after that clearing time,
its cheapest hours are read from those prices, not guessed from day D's. A time-of-use tariff is
published in advance, so D+1's hours come from the tariff itself (a Friday's are not a Saturday's).

Each site's next day is read from its own price source: a site with a `[tco] site_prices` entry
from its flat price, market node or tariff (in its time zone), the others from the fleet's
(reports.accounts.settings.site_price_settings, as the day's own costs were priced).

Persistence (day D's prices a day later) stays where the next day is not known: a real-time file
(prices settle after the hour), a flat price, a file without D+1 (a file from another year is
year-mapped for accounting, but that is not a forecast of the next day), or an advice made before
the market cleared. Grid intensity has no day-ahead market: the caller keeps persistence for it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from joulehouse.reports.accounts.prices import (DEFAULT_PRICE_FILE, KWH_PER_MWH, load_pjm_lmp_csv, load_urdb_tariff,
                                                tariff_prices)
from joulehouse.reports.accounts.settings import TcoSettings, site_price_settings

DAY_AHEAD_PRICE_COLUMN = "total_lmp_da"
# PJM's day-ahead market results for the next operating day: about 13:30 Eastern (prevailing time).
CLEARING_LOCAL_TIME = dt.time(13, 30)
MARKET_TIMEZONE = "America/New_York"


@dataclass(frozen=True)
class NextDayPrices:
    """Prices of the advice's day, hour_at (UTC) and price_usd_per_mwh (None: not known ahead),
    and the sentence that says where they come from or why they are not known."""

    prices: pl.DataFrame | None
    basis: str


def clearing_time(delivery_day: dt.date) -> dt.datetime:
    """When the day-ahead prices of `delivery_day` are published (UTC)."""
    local = dt.datetime.combine(delivery_day - dt.timedelta(days=1), CLEARING_LOCAL_TIME, ZoneInfo(MARKET_TIMEZONE))
    return local.astimezone(dt.timezone.utc)


def _hours(day: dt.date) -> pl.Series:
    start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    return pl.Series("hour_at", [start + dt.timedelta(hours=h) for h in range(24)], dtype=pl.Datetime("us", "UTC"))


def _price_file(settings: TcoSettings, data_dir: Path | None) -> Path | None:
    # the same file the day's own costs were priced from (reports.accounts.tco.hourly_prices)
    if settings.price_file:
        return Path(settings.price_file)
    return Path(data_dir) / DEFAULT_PRICE_FILE if data_dir is not None else None


def _is_day_ahead(path: Path) -> bool:
    with open(path, encoding="utf-8") as f:
        header = f.readline()
    return DAY_AHEAD_PRICE_COLUMN in [c.strip().strip('"') for c in header.split(",")]


def next_day_prices(day: dt.date, now: dt.datetime, settings: TcoSettings | None,
                    data_dir: Path | None = None, site: str | None = None) -> NextDayPrices:
    """The prices of day + 1 as known at `now`, per the module doc (prices None where they are not);
    `site`: priced at its own [tco] site_prices source where it has one (None: the fleet's source)."""
    target = day + dt.timedelta(days=1)
    if settings is None:
        return NextDayPrices(None, "no price settings given to the advice")
    if site is not None:
        settings, data_dir = site_price_settings(settings, site, data_dir)
    if settings.tariff_file:
        tariff = load_urdb_tariff(Path(settings.tariff_file), settings.tariff_tier)
        frame = tariff_prices(tariff, _hours(target), settings.tariff_timezone).select(
            "hour_at", (pl.col("price_usd_per_kwh") * KWH_PER_MWH).alias("price_usd_per_mwh"))
        return NextDayPrices(frame, f"time-of-use tariff {tariff.name!r} for {target.isoformat()} (published ahead)")
    path = _price_file(settings, data_dir)
    if path is None:
        return NextDayPrices(None, "a flat price: no hour is cheaper than another")
    if not _is_day_ahead(path):
        return NextDayPrices(None, f"{path.name} holds real-time prices, known only after each hour")
    cleared = clearing_time(target)
    if now.astimezone(dt.timezone.utc) < cleared:
        return NextDayPrices(None, f"the day-ahead market for {target.isoformat()} clears at {cleared:%Y-%m-%dT%H:%MZ}, "
                                   "after this advice")
    lmp = load_pjm_lmp_csv(path, settings.price_node)
    wanted = _hours(target)
    frame = lmp.filter(pl.col("hour_at").is_in(wanted.implode())).select("hour_at", "price_usd_per_mwh").drop_nulls()
    if frame.height < wanted.len():
        return NextDayPrices(None, f"{path.name} has {frame.height} of the 24 day-ahead hours of {target.isoformat()}")
    return NextDayPrices(frame.sort("hour_at"), f"day-ahead prices of {target.isoformat()} ({path.name}, node "
                                                f"{settings.price_node}, cleared {cleared:%Y-%m-%dT%H:%MZ})")
