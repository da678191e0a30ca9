"""Put an hourly reference series (grid intensity, prices) onto the hours being accounted.

The reference files cover one past year (Electricity Maps FR 2022, PJM 2025...) while the fleet
runs in another. The stated rule, applied to every target hour and counted in `value_rule`:

1. `exact`: the source has that very hour (same year).
2. `year_mapped`: otherwise the same weekday and hour of the day, in the week of the same
   calendar date of the source year nearest the target year (ties go to the earlier year): the
   target hour moved back by the whole number of weeks nearest to the years between them (29
   February counts as 28 February in a year without it). Prices and grid intensity follow the
   week (weekends and Mondays differ from midweek): the same date in another year falls on
   another weekday, and so mapped a Saturday's prices onto a Monday. Where no source year has that
   week (the turn of a year: 31 December moved back 52 weeks is 1 January of the same year; a
   source that stops short), the week before it in the nearest year that has one, else the week
   after (always in that order, so one gap is filled from one week).
   The date moves by up to 3 days (10 with the week either side): fixed-date holidays move too.
3. `interpolated`: the source hour chosen by 1 or 2 was itself missing inside the source's span,
   in a gap of at most MAX_INTERPOLATED_GAP_H hours; it is filled by linear interpolation in time
   between its neighbours. The hours of a longer gap (a missing day, a year between two files)
   count as absent: a straight line across them would flatten the day's shape, so they take the
   next source week or year by rule 2, or rule 4.
4. `hour_of_day_mean`: the source has none of those weeks in any year (e.g. a 3-month WattTime
   file and a target in June): the mean of the source at that hour of day.
5. `default`: the source is empty; the caller's default value.

Hours are UTC. Frames: `hour_at` is `Datetime("us", "UTC")`, truncated to the hour.
"""

from __future__ import annotations

import polars as pl

UTC_HOUR = pl.Datetime("us", "UTC")
RULES = ("exact", "year_mapped", "interpolated", "hour_of_day_mean", "default")
# A few missing hours (a feed outage, a DST glitch) are bridged; a day's gap loses the day's shape.
MAX_INTERPOLATED_GAP_H = 6


def complete_hourly(source: pl.DataFrame, value_cols: list[str]) -> pl.DataFrame:
    """Reindex `source` (hour_at + value_cols) to every hour of its span; gaps of at most
    MAX_INTERPOLATED_GAP_H hours are filled by linear interpolation and flagged `interpolated`
    (bool), the hours of longer gaps are left out."""
    if source.height == 0:
        return source.with_columns(pl.lit(False).alias("interpolated"))
    src = source.sort("hour_at").unique("hour_at", keep="first", maintain_order=True)
    hours = pl.datetime_range(
        src["hour_at"].min(), src["hour_at"].max(), interval="1h", time_unit="us", time_zone="UTC",
        eager=True,
    ).alias("hour_at")
    full = pl.DataFrame(hours).join(src.with_columns(pl.lit(False).alias("interpolated")),
                                    on="hour_at", how="left")
    full = full.with_columns(pl.col("interpolated").fill_null(True))
    # Each run of missing hours is one gap; only the short ones are bridged.
    gap_id = (pl.col("interpolated") != pl.col("interpolated").shift(1)).fill_null(True).cum_sum()
    full = full.filter(~pl.col("interpolated") | (pl.len().over(gap_id) <= MAX_INTERPOLATED_GAP_H))
    # only the absent hours are filled: a NULL the file wrote (a grid file's unknown renewable share)
    # stays NULL, where it was bridged across any gap and labelled exact
    return full.with_columns([pl.when(pl.col("interpolated")).then(pl.col(c).cast(pl.Float64).interpolate_by("hour_at"))
                              .otherwise(pl.col(c).cast(pl.Float64)).alias(c) for c in value_cols])


def map_to_target_hours(
    source: pl.DataFrame,
    target_hours: pl.Series | list,
    value_cols: list[str],
    defaults: dict[str, float | None],
) -> pl.DataFrame:
    """One row per target hour: hour_at, each value column, `source_hour_at` (the source hour
    used, NULL for the fallbacks) and `value_rule` (one of RULES, see the module docstring)."""
    target = (
        pl.DataFrame({"hour_at": pl.Series(target_hours).cast(UTC_HOUR)})
        .unique("hour_at").sort("hour_at")
    )
    if source.height == 0:
        return target.with_columns(
            [pl.lit(defaults.get(c), dtype=pl.Float64).alias(c) for c in value_cols]
            + [pl.lit(None, dtype=UTC_HOUR).alias("source_hour_at"), pl.lit("default").alias("value_rule")]
        )
    full = complete_hourly(source.select(["hour_at", *value_cols]), value_cols)
    years = full.select(pl.col("hour_at").dt.year().unique().alias("src_year"))
    month, day = pl.col("hour_at").dt.month(), pl.col("hour_at").dt.day()
    # The target's calendar date in each source year; 29 February is 28 February where there is none.
    same_day = pl.when((month == 2) & (day == 29) & ~_is_leap(pl.col("src_year"))).then(28).otherwise(day)
    candidates = (
        target.join(years, how="cross")
        .with_columns(
            pl.col("hour_at").dt.year().alias("tgt_year"),
            (pl.col("hour_at").dt.date() - pl.date(pl.col("src_year"), month, same_day)).dt.total_days().alias("lag_days"),
        )
        .with_columns((pl.col("lag_days") / 7).round().cast(pl.Int64).alias("weeks"))
        # the nearest whole number of weeks first; the week on either side where that one is not in the source
        .join(pl.DataFrame({"extra_weeks": [0, -1, 1]}, schema={"extra_weeks": pl.Int64}), how="cross")
        .with_columns(
            (pl.col("hour_at") - pl.duration(weeks=pl.col("weeks") + pl.col("extra_weeks"))).alias("source_hour_at"),
            (pl.col("src_year").cast(pl.Int32) - pl.col("tgt_year").cast(pl.Int32)).abs().alias("dist"),
            pl.col("extra_weeks").abs().alias("off_week"),
        )
    )
    matched = (
        candidates.join(full.rename({"hour_at": "source_hour_at"}), on="source_hour_at", how="inner")
        # the right week of any year before the week either side of the nearest one, and of those
        # two always the week before: a tie left to the join's order filled one gap from both
        # weeks, hour by hour (250 g/kWh, then 110 for two hours, then 250 again)
        .sort(["hour_at", "off_week", "dist", "src_year", "extra_weeks"], descending=[False] * 4 + [True])
        .group_by("hour_at", maintain_order=True).first()
        .with_columns(
            pl.when(pl.col("interpolated")).then(pl.lit("interpolated"))
            .when(pl.col("source_hour_at") == pl.col("hour_at")).then(pl.lit("exact"))
            .otherwise(pl.lit("year_mapped")).alias("value_rule")
        )
        .select(["hour_at", *value_cols, "source_hour_at", "value_rule"])
    )
    missing = target.join(matched.select("hour_at"), on="hour_at", how="anti")
    if missing.height:
        profile = full.group_by(pl.col("hour_at").dt.hour().alias("k_hour")).agg(
            [pl.col(c).mean() for c in value_cols]
        )
        filled = (
            missing.with_columns(pl.col("hour_at").dt.hour().alias("k_hour"))
            .join(profile, on="k_hour", how="left")
            # an hour of the day the source never holds has no profile: the default, and said so
            # (it was counted 'hour_of_day_mean', and the CLI's default of 0 went by unseen)
            .with_columns(pl.when(pl.all_horizontal([pl.col(c).is_null() for c in value_cols]))
                          .then(pl.lit("default")).otherwise(pl.lit("hour_of_day_mean")).alias("value_rule"))
            # a None default keeps the hour NULL (polars refuses fill_null(None): a grid file
            # without renewable shares stopped the day whenever an hour fell back to this profile)
            .with_columns([pl.col(c).fill_null(defaults[c]) for c in value_cols if defaults.get(c) is not None])
            .with_columns(pl.lit(None, dtype=UTC_HOUR).alias("source_hour_at"))
            .select(["hour_at", *value_cols, "source_hour_at", "value_rule"])
        )
        matched = pl.concat([matched, filled], how="vertical_relaxed")
    return matched.sort("hour_at")


def _is_leap(year: pl.Expr) -> pl.Expr:
    return ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)


def rule_counts(mapped: pl.DataFrame) -> dict[str, int]:
    """How many target hours each rule produced (every rule listed, zeros included)."""
    counts = dict(mapped.group_by("value_rule").len().iter_rows())
    return {rule: int(counts.get(rule, 0)) for rule in RULES}
