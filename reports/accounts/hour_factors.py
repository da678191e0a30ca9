"""Attach the per-hour context (PUE of the site, grid intensity and renewable share of the
region) to metered GPU-hours. Shared by the carbon and cost accounts.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from joulehouse.reports.accounts.grid import intensity_for_region
from joulehouse.reports.accounts.yearmap import RULES, map_to_target_hours, rule_counts


def attach_pue(gpu_hours: pl.DataFrame, pue: pl.DataFrame, default_pue: float) -> tuple[pl.DataFrame, int]:
    """Add `pue` (ratio) per (site, hour). Hours the warehouse has no PUE for get `default_pue`;
    returns the frame and how many GPU-hours used the default."""
    joined = gpu_hours.join(
        pue.select("hour_at", "site", pl.col("pue").cast(pl.Float64)).unique(["hour_at", "site"]),
        on=["hour_at", "site"], how="left",
    )
    defaulted = int(joined["pue"].null_count())
    return joined.with_columns(pl.col("pue").fill_null(default_pue)), defaulted


def attach_intensity(
    gpu_hours: pl.DataFrame, grid_file: str, data_dir: Path | None, basis: str, default_gco2e_per_kwh: float,
    grid_file_region: str | None = None,
) -> tuple[pl.DataFrame, dict[str, int], list[str]]:
    """Add `intensity_gco2e_per_kwh`, `renewable_pct` (NULL when unknown) and
    `intensity_rule` per (region, hour) using the year-mapping rule of reports.accounts.yearmap.
    Returns the frame, the count of distinct region-hours per rule, and source sentences.
    `grid_file` holds the hours of `grid_file_region` (the settings' region): other regions get
    their reference file, else the default (grid.intensity_for_region)."""
    mapped_parts, sources = [], []
    counts = dict.fromkeys(RULES, 0)
    for region in sorted(gpu_hours["region"].unique().to_list()):
        hours = gpu_hours.filter(pl.col("region") == region)["hour_at"].unique().sort()
        source, sentence = intensity_for_region(region, grid_file, data_dir, basis, grid_file_region=grid_file_region)
        mapped = map_to_target_hours(
            source, hours, ["intensity_gco2e_per_kwh", "renewable_pct"],
            {"intensity_gco2e_per_kwh": default_gco2e_per_kwh, "renewable_pct": None},
        )
        for rule, n in rule_counts(mapped).items():
            counts[rule] += n
        sources.append(sentence)
        mapped_parts.append(mapped.select(
            pl.lit(region).alias("region"), "hour_at", "intensity_gco2e_per_kwh", "renewable_pct",
            pl.col("value_rule").alias("intensity_rule"),
        ))
    if not mapped_parts:
        return gpu_hours.with_columns(
            pl.lit(None, dtype=pl.Float64).alias("intensity_gco2e_per_kwh"),
            pl.lit(None, dtype=pl.Float64).alias("renewable_pct"), pl.lit(None, dtype=pl.String).alias("intensity_rule"),
        ), counts, sources
    mapped_all = pl.concat(mapped_parts, how="vertical_relaxed")
    return gpu_hours.join(mapped_all, on=["region", "hour_at"], how="left"), counts, sources
