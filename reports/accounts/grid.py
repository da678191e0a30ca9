"""Grid carbon intensity loaders: real files in, one hourly frame per region out.

Every loader returns `hour_at` (UTC, start of the hour), `region`, `intensity_gco2e_per_kwh`
(hourly mean), `renewable_pct` (NULL where the source has none) and `samples_n` (readings
averaged into that hour).

The documented format for users' own files (`CarbonSettings.grid_file`): CSV with a header row
    at,region,gco2e_per_kwh[,renewable_pct]
`at` an ISO-8601 timestamp with offset or `Z` (UTC), the start of an interval of one hour or
less (a time without either is refused: read as UTC, a local export lands an hour or two off); `gco2e_per_kwh` grams CO2e per kWh consumed. Finer intervals are averaged to the hour.

Electricity Maps gives two intensities: `direct` (combustion only) and `lca` (life cycle, with
upstream fuel and plant construction). We use `direct` by default because GHG Protocol scope 2
counts generation emissions only; life-cycle upstream belongs to scope 3 category 3
(`CarbonSettings.grid_intensity_basis = "lca"` switches).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from joulehouse.collectors.input_file import regular_file
from joulehouse.reports.accounts.csv_cells import number, parsed, text_csv, utc_time
from joulehouse.reports.accounts.settings import MAX_GCO2E_PER_KWH

# 1 lb = 453.59237 g, 1 MWh = 1000 kWh.
GCO2E_PER_KWH_PER_LB_PER_MWH = 0.45359237

# The reference file used for a region when no grid_file is set (paths under ../shared/data).
DEFAULT_REGION_FILES = {
    "FR": "grid/electricitymaps_FR_2022_hourly.csv",
    "CAISO_NORTH": "grid/watttime_moer_CAISO_NORTH_5min_2023-11.csv",
    "MISO_MASON_CITY": "grid/watttime_moer_MISO_MASON_CITY_2022-10_30min_from_zeus.csv",
}


class GridFileError(ValueError):
    """An intensity file is missing, or its header or values are not what the format says."""


HOUR_US = 3_600_000_000
# the end of an ISO-8601 time of day that says its offset from UTC: Z, +HH, +HHMM or +HH:MM
UTC_OFFSET_AT_END = r"(?i)[T ]\d{2}(:\d{2}){0,2}(\.\d+)?\s*(Z|[+-]\d{2}(:?\d{2})?)$"


def _to_hourly(frame: pl.DataFrame) -> pl.DataFrame:
    """Readings (at, region, intensity, renewable_pct) into UTC hours, each hour the mean over the
    time each reading holds: from its `at` to the next reading's, at most twice the file's usual
    step (the median spacing of its region's readings) and at most an hour, so a gap is not bridged. Counted
    per reading, a half-hour zone's hourly file was put 30 minutes early and MISO's readings at :20
    and :50 gave each hour a shifted mix (2.6% off); a timestamp given twice is one reading."""
    intensity = pl.col("intensity_gco2e_per_kwh")
    bad = frame.filter(intensity.is_null() | (intensity < 0) | (intensity > MAX_GCO2E_PER_KWH))
    if bad.height:
        raise GridFileError(
            f"{bad.height} intensity values are missing, negative or above {MAX_GCO2E_PER_KWH:,} "
            f"(first at {bad['at'][0]}); expected gCO2e/kWh from 0 to {MAX_GCO2E_PER_KWH:,}"
        )
    at_us = pl.col("at").dt.epoch("us")
    readings = (
        frame.with_columns(pl.col("at").dt.convert_time_zone("UTC"))
        .group_by(["region", "at"]).agg(intensity.mean(), pl.col("renewable_pct").mean())
        .sort(["region", "at"])
        .with_columns((at_us.shift(-1).over("region") - at_us).alias("gap_us"))
    )
    usual = pl.col("gap_us").median().fill_null(HOUR_US).clip(upper_bound=HOUR_US)
    step = readings.group_by("region").agg(usual.cast(pl.Int64).alias("usual_us"),
                                           (2 * usual).clip(upper_bound=HOUR_US).cast(pl.Int64).alias("step_us"))
    start, hour = pl.col("at"), pl.col("hour_at")
    # the last reading holds the usual step
    held_us = pl.when(pl.col("gap_us").is_null()).then(pl.col("usual_us")).otherwise(
        pl.min_horizontal("gap_us", "step_us"))
    end = pl.col("at") + pl.duration(microseconds=held_us)
    weight = (pl.min_horizontal(pl.col("end"), hour + pl.duration(hours=1))
              - pl.max_horizontal(start, hour)).dt.total_microseconds().cast(pl.Float64)
    spread = (
        readings.join(step, on="region").with_columns(end.alias("end"))
        .with_columns(pl.datetime_ranges(start.dt.truncate("1h"), pl.col("end") - pl.duration(microseconds=1), "1h")
                      .alias("hour_at"))
        .explode("hour_at")
        .with_columns(weight.alias("weight_us"))
    )
    renewable_weight = pl.when(pl.col("renewable_pct").is_not_null()).then(pl.col("weight_us"))
    return (
        spread.group_by(["hour_at", "region"])
        .agg(
            ((intensity * pl.col("weight_us")).sum() / pl.col("weight_us").sum()).alias("intensity_gco2e_per_kwh"),
            # no reading of the hour gives a share (WattTime, a user's file): NULL, not 0/0 = NaN
            pl.when(renewable_weight.sum() > 0)
            .then((pl.col("renewable_pct") * renewable_weight).sum() / renewable_weight.sum())
            .alias("renewable_pct"),
            pl.len().alias("samples_n"),
        )
        .with_columns(pl.col("hour_at").cast(pl.Datetime("us", "UTC")), pl.col("samples_n").cast(pl.Int64))
        .sort(["region", "hour_at"])
    )


def _read_csv(path: Path) -> pl.DataFrame:
    return text_csv(path, "grid intensity file", GridFileError)


def load_electricitymaps_csv(path: Path, basis: str = "direct", *, raw: pl.DataFrame | None = None) -> pl.DataFrame:
    """Electricity Maps hourly export (`Datetime (UTC)` as dd/mm/yyyy HH:MM, gCO2eq/kWh)."""
    columns = {"direct": "Carbon Intensity gCO2eq/kWh (direct)", "lca": "Carbon Intensity gCO2eq/kWh (LCA)"}
    if basis not in columns:
        raise GridFileError(f"grid_intensity_basis {basis!r}: expected 'direct' or 'lca'")
    raw = _read_csv(path) if raw is None else raw
    needed = ["Datetime (UTC)", "Zone Id", columns[basis], "Renewable Percentage"]
    missing = [c for c in needed if c not in raw.columns]
    if missing:
        raise GridFileError(f"{path}: not an Electricity Maps export, missing columns {missing}")
    frame = parsed(path, raw, {
        "at": ("Datetime (UTC)", utc_time("Datetime (UTC)", "%d/%m/%Y %H:%M")),
        "region": (None, pl.col("Zone Id")),
        "intensity_gco2e_per_kwh": (columns[basis], number(columns[basis])),
        "renewable_pct": ("Renewable Percentage", number("Renewable Percentage")),
    }, GridFileError)
    return _to_hourly(frame)


def load_watttime_moer_csv(path: Path, region: str = "CAISO_NORTH", *, raw: pl.DataFrame | None = None) -> pl.DataFrame:
    """WattTime MOER export (`point_time`, `value` in lbs CO2/MWh, 5-minute), converted to
    gCO2e/kWh and averaged to the hour. The file carries no region: the caller names it."""
    raw = _read_csv(path) if raw is None else raw
    if not {"point_time", "value"} <= set(raw.columns):
        raise GridFileError(f"{path}: expected WattTime columns point_time,value; got {raw.columns}")
    frame = parsed(path, raw, {
        "at": ("point_time", utc_time("point_time")),
        "region": (None, pl.lit(region)),
        "intensity_gco2e_per_kwh": ("value", number("value") * GCO2E_PER_KWH_PER_LB_PER_MWH),
        "renewable_pct": (None, pl.lit(None, dtype=pl.Float64)),
    }, GridFileError)
    return _to_hourly(frame)


def load_watttime_historical_csv(path: Path, *, raw: pl.DataFrame | None = None) -> pl.DataFrame:
    """WattTime historical MOER as stored by Zeus (`location,timestamp,duration,value`): units
    are not stated in the file; WattTime's MOER unit is lbs/MWh, which we assume and convert."""
    raw = _read_csv(path) if raw is None else raw
    if not {"location", "timestamp", "value"} <= set(raw.columns):
        raise GridFileError(f"{path}: expected columns location,timestamp,value; got {raw.columns}")
    frame = parsed(path, raw, {
        "at": ("timestamp", utc_time("timestamp")),
        "region": (None, pl.col("location")),
        "intensity_gco2e_per_kwh": ("value", number("value") * GCO2E_PER_KWH_PER_LB_PER_MWH),
        "renewable_pct": (None, pl.lit(None, dtype=pl.Float64)),
    }, GridFileError)
    return _to_hourly(frame)


def load_user_intensity_csv(path: Path, *, raw: pl.DataFrame | None = None) -> pl.DataFrame:
    """The documented format (module docstring): at,region,gco2e_per_kwh[,renewable_pct]."""
    raw = _read_csv(path) if raw is None else raw
    if not {"at", "region", "gco2e_per_kwh"} <= set(raw.columns):
        raise GridFileError(
            f"{path}: expected header at,region,gco2e_per_kwh[,renewable_pct]; got {raw.columns}"
        )
    renewable = ("renewable_pct", number("renewable_pct")) if "renewable_pct" in raw.columns else (
        None, pl.lit(None, dtype=pl.Float64))
    # a wall-clock time without an offset would be read as UTC: a local export lands 1-2 h off
    zoneless = (raw["at"].is_not_null() & ~raw["at"].str.strip_chars().str.contains(UTC_OFFSET_AT_END)).arg_true()
    if len(zoneless):
        row = int(zoneless[0])
        raise GridFileError(f"{path} line {row + 2}: at = {raw['at'][row]!r} has no UTC offset; expected ISO-8601 "
                            "ending in Z or +HH:MM (a local time without one cannot be put on its UTC hour)")
    frame = parsed(path, raw, {
        "at": ("at", utc_time("at")),
        "region": (None, pl.col("region")),
        "intensity_gco2e_per_kwh": ("gco2e_per_kwh", number("gco2e_per_kwh")),
        "renewable_pct": renewable,
    }, GridFileError)
    return _to_hourly(frame)


def load_intensity_file(path: Path, region: str | None = None, basis: str = "direct") -> pl.DataFrame:
    """Pick the loader from the file's header; `region` names files that carry none (WattTime)."""
    path = Path(path)
    raw = _read_csv(path)  # once: the header picks the loader, which parses these same cells
    header = raw.columns
    if "Datetime (UTC)" in header:
        return load_electricitymaps_csv(path, basis, raw=raw)
    if "point_time" in header:
        return load_watttime_moer_csv(path, region or "CAISO_NORTH", raw=raw)
    if "location" in header and "timestamp" in header:
        return load_watttime_historical_csv(path, raw=raw)
    return load_user_intensity_csv(path, raw=raw)


def intensity_for_region(
    region: str, grid_file: str, data_dir: Path | None, basis: str = "direct",
    setting: str = "[carbon]/[tco] grid_file", grid_file_region: str | None = None,
) -> tuple[pl.DataFrame, str]:
    """The hourly intensity of `region` and a sentence saying where it came from. An empty
    frame (and a sentence saying so) when no file is known for the region. A `grid_file` that is
    not a file is a GridFileError naming `setting` (where the path was given).

    `grid_file_region`: the region the settings give `grid_file` for (their `region`); a file
    holding one region whose rows are not named `region` is taken as that one's only, and every
    other region gets its reference file under `data_dir`, else nothing. None (the CLI, where the
    file is given with --region): the file is `region`'s."""
    if grid_file:
        path = Path(grid_file)
        try:
            regular_file(path, "grid intensity file", GridFileError)
        except GridFileError as exc:
            raise GridFileError(f"{exc} ({setting})") from None
        # a file naming no region (WattTime's) is the settings' region's: named for the region asked,
        # a French GPU was charged California's hours (6x its own) as if they were France's
        frame = load_intensity_file(path, grid_file_region or region, basis)
        if frame.filter(pl.col("region") == region).height == 0 and frame["region"].n_unique() == 1:
            if grid_file_region is not None and region != grid_file_region:
                # France's hours charged to a GPU placed in Germany, labelled 'exact': the file is
                # the settings' region's, not every region's
                return _reference_file(region, data_dir, basis)
            frame = frame.with_columns(pl.lit(region).alias("region"))  # a single-region file named for it
        frame = frame.filter(pl.col("region") == region)
        if frame.height or grid_file_region is None:
            return frame, f"{path.name}, region {region}, basis {basis}"
    return _reference_file(region, data_dir, basis)


def _reference_file(region: str, data_dir: Path | None, basis: str) -> tuple[pl.DataFrame, str]:
    """The region's reference file under `data_dir` (DEFAULT_REGION_FILES), else an empty frame."""
    if data_dir is None or region not in DEFAULT_REGION_FILES:
        return _empty(), f"no intensity file for region {region!r}: flat default used"
    path = Path(data_dir) / DEFAULT_REGION_FILES[region]
    frame = load_intensity_file(path, region, basis).filter(pl.col("region") == region)
    return frame, f"{path.name}, region {region}, basis {basis}"


def _empty() -> pl.DataFrame:
    return pl.DataFrame(schema={
        "hour_at": pl.Datetime("us", "UTC"), "region": pl.String, "intensity_gco2e_per_kwh": pl.Float64,
        "renewable_pct": pl.Float64, "samples_n": pl.Int64,
    })
