"""The residual mix of a grid region: what market-based scope 2 charges for energy no contract covers.

The table (reports/accounts/residual_mix.csv: region, data year, gCO2/kWh, source) holds the
Association of Issuing Bodies' European Residual Mixes, Table 2 (direct CO2, gCO2/kWh), for the
data years 2023 and 2025. The figures were transcribed from a public, cell-by-cell transcription
of AIB's published spreadsheets and PDFs (the AIB site cannot be reached from here to re-check
them); each row names the edition and table. A region the table lacks (the US: its Green-e
residual mix is not in the table), and a country AIB prints no residual mix for (full disclosure:
Austria, the Netherlands in 2025), is "not available": market-based carbon is then NULL where no
contract covers the energy, never a generic figure. A day uses the latest data year at or
before its own, else the earliest one after it (said so in the rule).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class ResidualMix:
    """The residual mix used for one region and year (gCO2e/kWh, None: not available) and why."""

    region: str
    gco2e_per_kwh: float | None
    data_year: int | None
    source: str

    @property
    def sentence(self) -> str:
        if self.gco2e_per_kwh is None:
            return f"residual mix of {self.region} not available ({self.source})"
        return f"residual mix of {self.region} {self.gco2e_per_kwh:g} gCO2/kWh ({self.source}, data year {self.data_year})"


@cache
def residual_mix_table() -> dict[str, list[tuple[int, float | None, str]]]:
    """region -> [(data year, gCO2/kWh or None, source)], years ascending."""
    table: dict[str, list[tuple[int, float | None, str]]] = {}
    with (resources.files("joulehouse.reports.accounts") / "residual_mix.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            value = row["residual_mix_gco2_per_kwh"].strip()
            table.setdefault(row["region"].strip().upper(), []).append(
                (int(row["data_year"]), float(value) if value else None, row["source"].strip()))
    return {region: sorted(rows) for region, rows in table.items()}


def residual_mix_for(region: str | None, year: int) -> ResidualMix:
    """The table's residual mix for `region` (an ISO country code, or an Electricity Maps zone
    whose country part is one, e.g. DK-DK1) in `year`."""
    name = (region or "").strip().upper()
    rows = residual_mix_table().get(name) or residual_mix_table().get(name.split("-")[0])
    if not rows:
        return ResidualMix(name or "unknown", None, None, "no published residual mix for it in reports/accounts/residual_mix.csv")
    earlier = [r for r in rows if r[0] <= year]
    data_year, value, source = earlier[-1] if earlier else rows[0]
    if not earlier:
        source += f"; the earliest edition, as none is for {year} or before"
    return ResidualMix(name, value, data_year, source)
