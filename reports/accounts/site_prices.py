"""Which price source prices each site of an accounted day ([tco] site_prices), and running a
step of the cost accounts once per source.

A fleet on several sites may buy power from several utilities. A site with a site_prices entry is
priced at its own source (a flat price, a market node, a time-of-use tariff) in its own time zone:
its tariff's wall clock and its demand charge's billing months. The day's other sites share the
fleet's source ([tco] price_file / tariff_file / flat_price_usd_per_mwh, tariff_timezone). The
steps that read a price or a billing month (reports.accounts.tco) run once per source on its
sites' rows (`per_source`); a fleet without entries is one source and its frames go whole, so
its rows are those a fleet-wide price always gave.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from joulehouse.reports.accounts.settings import TcoSettings, parse_site_prices, site_price_settings


@dataclass(frozen=True)
class PriceSource:
    """One price source and the day's sites it prices. `settings`: the fleet's, with the source's
    price fields and time zone (reports.accounts.settings.site_price_settings); `site`: the site
    whose own entry it is, "" for the fleet's source."""

    sites: tuple[str, ...]
    settings: TcoSettings
    data_dir: Path | None
    site: str = ""


def price_sources(settings: TcoSettings, data_dir: Path | None, day_sites: list[str]) -> tuple[list[PriceSource], list[str]]:
    """(the sources pricing `day_sites`, the fleet's first where any site keeps it; notes): a
    site_prices entry for a site the day's fleet does not hold is said, as it prices nothing."""
    entries = parse_site_prices(settings.site_prices)
    own = sorted(site for site in set(day_sites) if site in entries)
    rest = tuple(sorted(site for site in set(day_sites) if site not in entries))
    sources = [PriceSource(rest, settings, data_dir)] if rest or not own else []
    for site in own:
        sources.append(PriceSource((site,), *site_price_settings(settings, site, data_dir), site=site))
    unused = sorted(set(entries) - set(day_sites))
    notes = [f"[tco] site_prices names {', '.join(map(repr, unused))}, which no GPU of the day's fleet is at (its "
             f"sites: {', '.join(sorted(set(day_sites))) or 'none'}): "
             f"{'that entry' if len(unused) == 1 else 'those entries'} priced nothing"] if unused else []
    return sources, notes


def per_source(frame: pl.DataFrame, sources: list[PriceSource],
               step: Callable[[pl.DataFrame, PriceSource], pl.DataFrame]) -> pl.DataFrame:
    """step(each source's sites' rows of `frame`, the source), the parts stacked; one source
    takes the frame whole (a fleet-wide price: the rows as they always were)."""
    if len(sources) == 1:
        return step(frame, sources[0])
    return pl.concat([step(frame.filter(pl.col("site").is_in(list(source.sites))), source) for source in sources],
                     how="diagonal_relaxed")


def added_counts(counts: list[dict[str, int]]) -> dict[str, int]:
    """Rule counts of several sources, added up by rule."""
    out: dict[str, int] = {}
    for one in counts:
        for rule, n in one.items():
            out[rule] = out.get(rule, 0) + n
    return out
