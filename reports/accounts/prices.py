"""Electricity price loaders: hourly market prices (PJM LMP) and time-of-use tariffs (OpenEI URDB).

Market prices come in $/MWh and are kept as published: negative prices (surplus hours) and
spikes (scarcity hours, near $2,000/MWh in the real-time file) are real costs or credits, never
clipped. Tariffs give $/kWh per period; the period of an hour is read from the URDB 12x24
matrices (month row, local hour column), weekday or weekend.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl

from joulehouse.collectors.input_file import read_bytes_at_most
from joulehouse.reports.accounts.csv_cells import number, parsed, text_csv, utc_time
from joulehouse.reports.accounts.settings import MAX_PRICE_USD_PER_MWH

DEFAULT_PRICE_FILE = "prices/pjm_rto_da_hourly_lmp_2025.csv"
KWH_PER_MWH = 1000.0
# A URDB tariff is tens of KB of JSON: a larger file is not one, refused unread.
MAX_TARIFF_BYTES = 16 << 20


class PriceFileError(ValueError):
    """A price or tariff file is missing or does not have the structure its format promises."""


def usd_per_mwh_to_usd_per_kwh(price_usd_per_mwh: float) -> float:
    """$/MWh -> $/kWh (divide by 1000)."""
    return price_usd_per_mwh / KWH_PER_MWH


def load_pjm_lmp_csv(path: Path, node: str) -> pl.DataFrame:
    """PJM hourly LMP export (Data Miner 2), day-ahead (`total_lmp_da`) or real-time
    (`total_lmp_rt`), for one pricing node. Returns hour_at (UTC), node, price_usd_per_mwh."""
    raw = text_csv(path, "price file", PriceFileError)
    price_col = next((c for c in ("total_lmp_da", "total_lmp_rt") if c in raw.columns), None)
    if price_col is None or "datetime_beginning_utc" not in raw.columns or "pnode_name" not in raw.columns:
        raise PriceFileError(
            f"{path}: expected PJM columns datetime_beginning_utc, pnode_name, total_lmp_da|total_lmp_rt"
        )
    nodes = raw["pnode_name"].unique().sort().to_list()
    if node not in nodes:
        raise PriceFileError(f"{path}: pricing node {node!r} not in the file; it has {nodes}")
    # parsed before the node's rows are kept, so an error names the file's own line
    frame = parsed(path, raw, {
        "hour_at": ("datetime_beginning_utc", utc_time("datetime_beginning_utc", "%m/%d/%Y %I:%M:%S %p")),
        "node": (None, pl.col("pnode_name")),
        "price_usd_per_mwh": (price_col, number(price_col)),
    }, PriceFileError)
    wild = (frame["price_usd_per_mwh"].abs() > MAX_PRICE_USD_PER_MWH).arg_true()
    if len(wild):
        raise PriceFileError(f"{path} line {int(wild[0]) + 2}: {price_col} = {raw[price_col][int(wild[0])]!r} "
                             f"is beyond +/-{MAX_PRICE_USD_PER_MWH:,} USD/MWh")
    node_rows = (
        frame.with_columns(_superseded_rank(raw).alias("_superseded"), (pl.int_range(pl.len()) + 2).alias("_line"))
        # an empty price cell is an hour the file does not price: absent, so the year mapping fills
        # it as it fills a missing row (kept, it was bridged by a line across any gap, or NULL and
        # left out of the day's cost, both labelled exact)
        .filter((pl.col("node") == node) & pl.col("price_usd_per_mwh").is_not_null())
    )
    _one_price_per_hour(path, node_rows, raw["datetime_beginning_utc"])
    return (
        node_rows
        # of an hour's versions, the current one (row_is_current, then the highest version_nbr):
        # the first row was the superseded price where an export kept the corrections
        .sort("_superseded", maintain_order=True)
        .unique("hour_at", keep="first")
        .drop("_superseded", "_line")
        .sort("hour_at")
    )


def _one_price_per_hour(path: Path, rows: pl.DataFrame, times: pl.Series) -> None:
    """PriceFileError naming the line where an hourly file is not one: a time off the hour (a
    15-minute file kept its :00 prices only, every hour charged at them), or two current rows of
    one hour with different prices (the first was charged, unsaid)."""
    off = rows.filter(pl.col("hour_at") != pl.col("hour_at").dt.truncate("1h"))
    if off.height:
        line = int(off["_line"][0])
        raise PriceFileError(f"{path} line {line}: datetime_beginning_utc {times[line - 2]!r} is not on the hour: "
                             "an hourly price file holds one price per hour")
    current = rows.filter(pl.col("_superseded") == pl.col("_superseded").min().over("hour_at"))
    clash = current.filter(pl.col("price_usd_per_mwh").n_unique().over("hour_at") > 1).sort("_line")
    if clash.height:
        lines = clash.filter(pl.col("hour_at") == clash["hour_at"][0])["_line"].to_list()
        raise PriceFileError(f"{path} lines {', '.join(map(str, lines))}: the hour {clash['hour_at'][0]:%Y-%m-%d %H:%M} "
                             "UTC has different prices and nothing (row_is_current, version_nbr) says which is current")


def _superseded_rank(raw: pl.DataFrame) -> pl.Series:
    """Per row of a PJM file (every cell text), a sort key that puts an hour's current version first
    (row_is_current true, then the highest version_nbr); all 0 without those columns."""
    text = lambda name: raw[name].str.strip_chars().str.to_lowercase()  # noqa: E731
    old = (text("row_is_current") != "true").fill_null(False).cast(pl.Int64) if "row_is_current" in raw.columns \
        else pl.zeros(raw.height, pl.Int64, eager=True)
    version = text("version_nbr").cast(pl.Int64, strict=False).fill_null(0).clip(0, 10**9) if "version_nbr" in raw.columns \
        else pl.zeros(raw.height, pl.Int64, eager=True)
    return old * 10**10 - version


@dataclass(frozen=True)
class UrdbTariff:
    """A time-of-use energy tariff: 12x24 period matrices and the $/kWh of each period.

    `rates_usd_per_kwh[p]` is the chosen volume tier's rate plus its adjustment (riders): by default
    the last tier of each period, the one a data centre's monthly volume reaches within its first
    hours (URDB tier bounds are hundreds to thousands of kWh a month); `[tco] tariff_tier` picks
    another. Volumes are not tracked through the month. `tier_note` says which tier was charged
    where the tariff has several ("" where it has one). `fixed_charge_usd_per_month` (URDB's
    fixedchargefirstmeter, a few dollars per meter) is kept for reference and not charged: it is no
    energy cost and the accounts know no meters to count it by."""

    name: str
    utility: str
    weekday_periods: tuple[tuple[int, ...], ...]
    weekend_periods: tuple[tuple[int, ...], ...]
    rates_usd_per_kwh: tuple[float, ...]
    fixed_charge_usd_per_month: float
    tier_note: str = ""

    def period_at(self, local: dt.datetime) -> int:
        """The period index of a local wall-clock time (Mon-Fri weekday, Sat/Sun weekend;
        public holidays are not in URDB's matrices and count as their weekday)."""
        matrix = self.weekend_periods if local.weekday() >= 5 else self.weekday_periods
        return matrix[local.month - 1][local.hour]

    def rate_at(self, local: dt.datetime) -> float:
        """$/kWh at a local wall-clock time."""
        return self.rates_usd_per_kwh[self.period_at(local)]


def _matrix(item: dict, key: str, path: Path) -> tuple[tuple[int, ...], ...]:
    rows = item.get(key)
    if not isinstance(rows, list) or len(rows) != 12 or any(not isinstance(r, list) or len(r) != 24 for r in rows):
        raise PriceFileError(f"{path}: {key} must be a 12x24 matrix (month rows, hour columns)")
    if not all(isinstance(v, int) and not isinstance(v, bool) for r in rows for v in r):
        # int() read "peak" as a traceback and truncated 1.7 to period 1
        raise PriceFileError(f"{path}: {key} must hold whole period numbers")
    return tuple(tuple(r) for r in rows)


def _rate(tier: dict, period: int, path: Path) -> float:
    """A tier's $/kWh plus its adjustment; Python's json reads NaN, Infinity and 1e999, and one such
    rate would make every hour of its period cost NaN or infinity."""
    adj = tier.get("adj")
    parts = (tier.get("rate"), 0.0 if adj is None else adj)  # URDB leaves adj out (or null) where none
    most = MAX_PRICE_USD_PER_MWH / KWH_PER_MWH
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in parts) \
            or not abs(parts[0] + parts[1]) <= most:
        raise PriceFileError(f"{path}: period {period}: rate {parts[0]!r} and adj {parts[1]!r} must be finite "
                             f"numbers, their sum within +/-{most:g} $/kWh")
    return float(parts[0]) + float(parts[1])


def parse_urdb_item(item: dict, path: Path = Path("<urdb>"), tier: int = -1) -> UrdbTariff:
    """One URDB rate record (the JSON the OpenEI API returns under `items`); `tier` the volume tier
    charged in every period (0 the first; a period with fewer tiers charges its last), -1 the last."""
    structure = item.get("energyratestructure")
    if not isinstance(structure, list) or not structure:
        raise PriceFileError(f"{path}: energyratestructure missing or empty")
    rates = []
    for p, tiers in enumerate(structure):
        if not isinstance(tiers, list) or not tiers or not all(isinstance(t, dict) for t in tiers):
            raise PriceFileError(f"{path}: period {p} must be a list of tiers, each with a rate")
        chosen = tiers[-1 if tier < 0 else min(tier, len(tiers) - 1)]
        if "rate" not in chosen:
            raise PriceFileError(f"{path}: period {p} has no rate")
        rates.append(_rate(chosen, p, path))
    most_tiers = max(len(tiers) for tiers in structure)
    tier_note = "" if most_tiers == 1 else (
        f"volume tier {most_tiers if tier < 0 else min(tier + 1, most_tiers)} of {most_tiers}"
        + (" (the last, a data centre's monthly volume)" if tier < 0 else ""))
    weekday = _matrix(item, "energyweekdayschedule", path)
    weekend = _matrix(item, "energyweekendschedule", path)
    used = {v for m in (weekday, weekend) for row in m for v in row}
    if max(used) >= len(rates) or min(used) < 0:
        raise PriceFileError(f"{path}: schedule uses period {max(used)} but only {len(rates)} rates are given")
    return UrdbTariff(
        name=str(item.get("name", "")), utility=str(item.get("utility", "")),
        weekday_periods=weekday, weekend_periods=weekend, rates_usd_per_kwh=tuple(rates),
        fixed_charge_usd_per_month=_fixed_charge(item, path), tier_note=tier_note,
    )


def _fixed_charge(item: dict, path: Path) -> float:
    value = item.get("fixedchargefirstmeter") or 0.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PriceFileError(f"{path}: fixedchargefirstmeter must be a finite number, got {value!r}")
    return float(value)


def load_urdb_tariff(path: Path, tier: int = -1) -> UrdbTariff:
    """An OpenEI URDB JSON file: `{"items": [record, ...]}` (first record) or one bare record;
    `tier` as parse_urdb_item's."""
    path = Path(path)
    try:
        data = json.loads(read_bytes_at_most(path, "tariff file", MAX_TARIFF_BYTES, PriceFileError))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PriceFileError(f"tariff file {path} is not JSON: {exc}") from None
    items = data.get("items") if isinstance(data, dict) and "items" in data else [data]
    if not isinstance(items, list) or not items:
        raise PriceFileError(f"{path}: no rate records under items (expected a list of records)")
    if not isinstance(items[0], dict):
        raise PriceFileError(f"{path}: a rate record must be a JSON object, got {type(items[0]).__name__}")
    return parse_urdb_item(items[0], path, tier)


def tariff_prices(tariff: UrdbTariff, hours: pl.Series, timezone: str) -> pl.DataFrame:
    """hour_at (UTC) -> price_usd_per_kwh and tou_period, looked up at local wall-clock time."""
    zone = ZoneInfo(timezone)
    rows = []
    for hour in hours.to_list():
        local = hour.astimezone(zone)
        rows.append((hour, tariff.rate_at(local), tariff.period_at(local)))
    return pl.DataFrame(
        rows, schema={"hour_at": pl.Datetime("us", "UTC"), "price_usd_per_kwh": pl.Float64, "tou_period": pl.Int64},
        orient="row",
    )
