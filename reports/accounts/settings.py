"""[carbon] and [tco]: the carbon accounts (GHG Protocol scope 2, both methods, plus embodied) and
the cost accounts (total cost of ownership).

Sections of the settings file (joulehouse.settings assembles them; collectors.settings reads
them); every value is checked when read. Both accounts charge the same hours the same way (the
site's PUE, the IT-energy basis, the idle policy, the shifting window): those fields are
declared once, in AccountSettings, and each section carries its own copy of them.
"""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import math
import zoneinfo
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from joulehouse.collectors.settings import PUE, Count, LocationOrNone, Names, NonNegativeInt, Percent, Positive, Ratio, section
from joulehouse.collectors.settings_fields import RelativeToFile

# Upper bounds of what a site can mean: past them a value is a typo (or hostile), and multiplied by a
# large fleet's energy it would leave the float range, so that a figure read `Infinity` or NaN
# (`tco estimate --price-usd-per-mwh 1e300` printed "total_cost_usd": Infinity with exit 0). The
# PUE's bound is the settings' own (collectors.settings.MAX_PUE).
MAX_PRICE_USD_PER_MWH = 100_000  # 20x the highest market cap (ERCOT's 5,000 USD/MWh)
MAX_GCO2E_PER_KWH = 5_000  # 4x lignite, the dirtiest generation (about 1,200)
MAX_DEMAND_CHARGE_USD_PER_KW_MONTH = 10_000
MAX_CAPEX_USD = 1_000_000_000
MAX_EMBODIED_KGCO2E = 10_000_000
MAX_CARBON_PRICE_USD_PER_TCO2E = 1_000_000
MAX_UPLIFT_RATIO = 100  # a premium, surcharge or yearly operations cost as a share
MAX_CONTRACT_KWH_PER_DAY = 10**12
LIFETIME_YEARS = (0.1, 100)  # from five weeks to a century


def _upto(most: float, *, ge: float = 0) -> object:
    return Annotated[float, Field(ge=ge, le=most, allow_inf_nan=False)]


PricePerMwh = _upto(MAX_PRICE_USD_PER_MWH)
GramsPerKwh = _upto(MAX_GCO2E_PER_KWH)
DemandCharge = _upto(MAX_DEMAND_CHARGE_USD_PER_KW_MONTH)
CapexUsd = _upto(MAX_CAPEX_USD)
EmbodiedKg = _upto(MAX_EMBODIED_KGCO2E)
CarbonPrice = _upto(MAX_CARBON_PRICE_USD_PER_TCO2E)
Uplift = _upto(MAX_UPLIFT_RATIO)
ContractKwh = _upto(MAX_CONTRACT_KWH_PER_DAY)
LifetimeYears = _upto(LIFETIME_YEARS[1], ge=LIFETIME_YEARS[0])


def _bounded(text: str, most: float) -> float:
    value = float(text)
    if not (math.isfinite(value) and 0 <= value <= most):
        raise ValueError
    return value


def parse_model_overrides(entries: tuple[str, ...]) -> dict[str, float]:
    """[carbon] embodied_kgco2e_by_gpu_model entries "GPU model name=kgCO2e" -> {name: kg};
    errors name the bad entry."""
    out: dict[str, float] = {}
    for entry in entries:
        name, sep, value = entry.rpartition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            out[name.strip()] = _bounded(value, MAX_EMBODIED_KGCO2E)
        except ValueError:
            raise ValueError(f"embodied override {entry!r}: expected 'GPU model name=kgCO2e', "
                             f"0 to {MAX_EMBODIED_KGCO2E:,} kgCO2e") from None
    return out


@dataclass(frozen=True)
class Contract:
    """A contractual instrument (PPA or REC): kWh for a site and period at an intensity."""

    site: str
    period: str  # YYYY-MM (monthly volume) or YYYY-MM-DD (one day)
    kwh: float
    gco2e_per_kwh: float

    def kwh_on(self, day: dt.date) -> float:
        """The volume available on `day`: a month's volume is spread evenly over its days."""
        if self.period == day.isoformat():
            return self.kwh
        if self.period == day.strftime("%Y-%m"):
            return self.kwh / calendar.monthrange(day.year, day.month)[1]
        return 0.0


def parse_contracts(entries: tuple[str, ...]) -> list[Contract]:
    """[carbon] market_contracts entries "site|YYYY-MM[-DD]|kwh|gco2e_per_kwh" -> contracts."""
    out = []
    for entry in entries:
        parts = [p.strip() for p in entry.split("|")]
        try:
            if len(parts) != 4 or len(parts[1]) not in (7, 10):
                raise ValueError
            # a period that is no date ("2026/03", "2026-02-30") matched no day and was dropped unsaid
            dt.date.fromisoformat(parts[1] if len(parts[1]) == 10 else f"{parts[1]}-01")
            days = 31 if len(parts[1]) == 7 else 1  # a month's volume may hold 31 days of the daily bound
            out.append(Contract(parts[0], parts[1], _bounded(parts[2], days * MAX_CONTRACT_KWH_PER_DAY),
                                _bounded(parts[3], MAX_GCO2E_PER_KWH)))
        except ValueError:
            raise ValueError(f"market contract {entry!r}: expected 'site|YYYY-MM[-DD]|kwh|gco2e_per_kwh', "
                             f"at most {MAX_CONTRACT_KWH_PER_DAY:.0e} kWh a day and {MAX_GCO2E_PER_KWH:,} "
                             "gCO2e/kWh") from None
    return out


def known_time_zone(name: str) -> str:
    """`name` if it is an IANA time zone, else ValueError naming it."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name too long for a file name
        raise ValueError(f"{name[:80]!r}{'...' if len(name) > 80 else ''} is not an IANA time zone "
                         "(e.g. America/New_York)") from None
    return name


SITE_PRICE_FORMATS = ("'site|flat|USD_PER_MWH|ZONE', 'site|market|NODE|ZONE[|PRICE_FILE]' or "
                      "'site|tariff|TARIFF_FILE|ZONE[|TIER]'")
# where each kind of site_prices entry names a file (0-based field), resolved as [tco] tariff_file is
_SITE_PRICE_FILE_FIELD = {"market": 4, "tariff": 2}


@dataclass(frozen=True)
class SitePrice:
    """A site's own price source ([tco] site_prices): a flat price, a market node or a tariff, in
    the site's time zone (its tariff's wall clock and its demand charge's billing months)."""

    site: str
    kind: Literal["flat", "market", "tariff"]
    timezone: str
    flat_price_usd_per_mwh: float | None = None
    price_node: str = ""
    price_file: str = ""  # market: "" is the fleet's price file
    tariff_file: str = ""
    tariff_tier: int = -1


def _site_price(entry: str) -> SitePrice:
    parts = [p.strip() for p in entry.split("|")]
    if len(parts) < 4 or not parts[0] or not parts[2]:
        raise ValueError
    site, kind, source, zone, extra = parts[0], parts[1], parts[2], known_time_zone(parts[3]), parts[4:]
    if kind == "flat" and not extra:
        return SitePrice(site, "flat", zone, flat_price_usd_per_mwh=_bounded(source, MAX_PRICE_USD_PER_MWH))
    if kind == "market" and len(extra) <= 1:
        return SitePrice(site, "market", zone, price_node=source, price_file=extra[0] if extra else "")
    if kind == "tariff" and len(extra) <= 1:
        tier = int(extra[0]) if extra else -1
        if not -1 <= tier <= 99:
            raise ValueError
        return SitePrice(site, "tariff", zone, tariff_file=source, tariff_tier=tier)
    raise ValueError


def parse_site_prices(entries: tuple[str, ...]) -> dict[str, SitePrice]:
    """[tco] site_prices entries (SITE_PRICE_FORMATS) -> {site: its price source}; errors name the
    bad entry (a site given twice is one: which of its prices would be charged is not said)."""
    out: dict[str, SitePrice] = {}
    for entry in entries:
        try:
            price = _site_price(entry)
        except ValueError as exc:
            zone = f" ({exc})" if "time zone" in str(exc) else ""
            raise ValueError(f"site price {entry!r}: expected {SITE_PRICE_FORMATS}{zone}; a flat price 0 to "
                             f"{MAX_PRICE_USD_PER_MWH:,} USD/MWh, a tier -1 (the last) to 99") from None
        if price.site in out:
            raise ValueError(f"site price {entry!r}: site {price.site!r} has an earlier entry; give each site one")
        out[price.site] = price
    return out


class SitePriceFiles(RelativeToFile):
    """Marks [tco] site_prices: the file an entry names (a tariff's, a market's price file) is read
    from a settings file as [tco] tariff_file is, relative to the file's folder."""

    def __init__(self) -> None:
        super().__init__(separator="|")

    def _entry(self, value: Any, folder: Path) -> Any:
        parts = value.split("|") if isinstance(value, str) else []
        index = _SITE_PRICE_FILE_FIELD.get(parts[1].strip()) if len(parts) > 1 else None
        if index is None or index >= len(parts):
            return value
        parts[index] = RelativeToFile().resolve(parts[index].strip(), folder)
        return "|".join(parts)


@section
class AccountSettings:
    """What the carbon and the cost accounts share."""

    region: str = Field(
        "FR", description="Grid region of GPUs the inventory does not place (dim_gpu.region wins where it has one); its\n"
                          "Electricity Maps file gives the hourly intensity (carbon) and renewable share (the green premium).")
    grid_file: LocationOrNone = Field("", description="Hourly grid file of the region (Electricity Maps, WattTime or your own CSV); empty: none.")
    default_pue: PUE = Field(1.3, description="PUE of the hours no facility meter covers (facility / IT power, at least 1).")
    gpus_per_server: Count = 8
    lifetime_years: LifetimeYears = Field(5.0, description="Years the hardware is amortised over (embodied carbon; capital).")
    idle_policy: Literal["unallocated", "proportional"] = Field(
        "unallocated", description="What no job held: an explicit \"unallocated\" line, or spread \"proportional\" to job energy.")
    node_energy_min_coverage_ratio: Ratio = Field(
        0.9, description="IT energy: a host-hour's BMC (IPMI) energy replaces its GPUs' board energy when the BMC\n"
                         "covered at least this share of the hour (reports.accounts.it_energy_basis); below it, GPU energy only.")
    shift_window_hours: NonNegativeInt = Field(
        0, description="Time-shifting estimate: hours a deferrable job may move from its own (0 = anywhere in its UTC day).")


@section
class CarbonSettings(AccountSettings):
    """Carbon accounting (GHG Protocol scope 2, both methods, plus embodied)."""

    default_grid_gco2e_per_kwh: GramsPerKwh = Field(400.0, description="Grid intensity where the grid file has no value, gCO2e/kWh.")
    market_contract_kwh_per_day: ContractKwh = Field(0.0, description="A contract (PPA/REC) volume per day that EACH site holds, kWh ...\n"
                                                                          "(one contract for the whole fleet: market_contracts, per site)")
    market_contract_gco2e_per_kwh: GramsPerKwh = Field(0.0, description="... at this intensity, gCO2e/kWh.")
    residual_mix_from: Literal["table", "setting"] = Field(
        "table", description="Market-based, what no contract covers: the region's published residual mix\n"
                             "(\"table\": reports/accounts/residual_mix.csv, AIB European Residual Mixes; \"not available\" where\n"
                             "it has none) or your own figure (\"setting\": residual_mix_gco2e_per_kwh).")
    residual_mix_gco2e_per_kwh: GramsPerKwh = Field(
        450.0, description="... the residual mix used with residual_mix_from = \"setting\", gCO2e/kWh.")
    embodied_kgco2e_per_gpu: EmbodiedKg = Field(150.0, description="Manufacturing footprint of a GPU, kgCO2e ...")
    embodied_kgco2e_per_server: EmbodiedKg = Field(2750.0, description="... and of its server (shared by gpus_per_server), kgCO2e.")
    grid_uncertainty_pct: Percent = Field(10.0, description="Relative uncertainties (+/-) of the carbon range, %.")
    pue_uncertainty_pct: Percent = 5.0
    embodied_uncertainty_pct: Percent = 30.0
    carbon_price_usd_per_tco2e: CarbonPrice = Field(
        0.0, description="Internal carbon price, USD/tCO2e: the recommender weighs carbon at it beside energy cost.")
    grid_intensity_basis: Literal["direct", "lca"] = Field(
        "direct", description="Electricity Maps column: \"direct\" (combustion, GHG Protocol scope 2) or \"lca\" (life cycle).")
    market_contracts: Names = Field(
        (), description="Market-based contracts (PPA/REC) per site and period: \"site|YYYY-MM|kwh|gco2e_per_kwh\"\n"
                        "(a month's volume, spread evenly over its days) or \"site|YYYY-MM-DD|kwh|gco2e_per_kwh\".")
    embodied_kgco2e_by_gpu_model: Names = Field(
        (), description="Per-model embodied overrides, \"NVIDIA H100 80GB HBM3=150\" (kgCO2e per GPU).")

    @field_validator("market_contracts")
    @classmethod
    def _contracts_parse(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        parse_contracts(entries)  # refused when the settings are read, not at the day's carbon step
        return entries

    @field_validator("embodied_kgco2e_by_gpu_model")
    @classmethod
    def _overrides_parse(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        parse_model_overrides(entries)
        return entries


@section
class TcoSettings(AccountSettings):
    """Total cost of ownership: prices, tariffs, demand charges, capital."""

    price_file: LocationOrNone = Field("", description="Hourly market prices (PJM LMP CSV); empty: the tariff, else the flat price.")
    price_node: str = Field("PJM-RTO", description="The pricing node of the price file.")
    tariff_file: LocationOrNone = Field("", description="A time-of-use tariff (OpenEI URDB JSON); empty: none.")
    tariff_tier: int = Field(
        -1, ge=-1, le=99, description="The tariff's volume tier charged (0 the first); -1: each period's last, where "
                                      "a data centre's monthly volume lies.")
    flat_price_usd_per_mwh: PricePerMwh = Field(80.0, description="Price of every hour without a price file or tariff, USD/MWh.")
    demand_charge_usd_per_kw_month: DemandCharge = Field(15.0, description="Rate x the month's highest site demand, USD/kW-month.")
    demand_interval_minutes: int = Field(
        15, description="The interval the utility averages demand over, minutes (a divisor of 60: 5, 15, 30, 60): the\n"
                        "month's peak is its highest such average of the facility meter's power; 60 bills hourly averages,\n"
                        "whose peak is lower.")
    green_premium_ratio: Uplift = Field(
        0.18, description="Uplift on energy cost in hours whose renewable share is below green_premium_below_renewable_pct.")
    green_premium_below_renewable_pct: Percent = 30.0
    density_surcharge_25_35kw_ratio: Uplift = Field(0.12, description="Uplift for racks of 25-35 kW ...")
    density_surcharge_over_35kw_ratio: Uplift = Field(0.28, description="... and above 35 kW.")
    rack_kw: Positive = Field(20.0, description="Provisioned power per rack, kW (chooses the density surcharge).")
    gpu_capex_usd: CapexUsd = Field(30000.0, description="Purchase price of a GPU, USD ...")
    server_capex_usd: CapexUsd = Field(60000.0, description="... and of its server (shared by gpus_per_server), USD.")
    operations_ratio_of_capex_per_year: Uplift = Field(0.1, description="Operations per year, as a share of capital.")
    tariff_timezone: str = Field(
        "America/New_York", description="Time-of-use tariffs are written in the utility's local wall-clock time; the\n"
                                        "demand charge's billing months are this zone's too, tariff or not: set it to the site's (a site\n"
                                        "elsewhere: the zone of its site_prices entry).")
    price_uncertainty_pct: Percent = Field(
        20.0, description="Relative uncertainty of the hourly price (+/-, %) for the cost range: an assumption (a\n"
                          "day-ahead price against the real-time one it stands for), not a measurement.")

    site_prices: Annotated[Names, SitePriceFiles()] = Field(
        (), description="Sites that buy power elsewhere, each with its own price source in place of the ones above:\n"
                        "\"site|flat|USD_PER_MWH|ZONE\", \"site|market|NODE|ZONE[|PRICE_FILE]\" (a PJM LMP file; none: price_file's)\n"
                        "or \"site|tariff|TARIFF_FILE|ZONE[|TIER]\" (URDB JSON; tier as tariff_tier, none: -1). ZONE is the site's\n"
                        "IANA time zone: its tariff's wall clock and its demand charge's billing months. A site without\n"
                        "an entry keeps the fleet's source and tariff_timezone.")

    @field_validator("tariff_timezone")
    @classmethod
    def _known_time_zone(cls, name: str) -> str:
        return known_time_zone(name)

    @field_validator("demand_interval_minutes")
    @classmethod
    def _divides_the_hour(cls, minutes: int) -> int:
        # an interval that straddles an hour could not be charged to the GPU-hours of one hour
        if not 1 <= minutes <= 60 or 60 % minutes:
            raise ValueError(f"{minutes}: expected a divisor of 60 minutes (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)")
        return minutes

    @field_validator("site_prices")
    @classmethod
    def _site_prices_parse(cls, entries: tuple[str, ...]) -> tuple[str, ...]:
        parse_site_prices(entries)  # refused when the settings are read, not at the day's cost step
        return entries


def site_price_settings(settings: TcoSettings, site: str, data_dir: Path | None) -> tuple[TcoSettings, Path | None]:
    """The settings and reference-data folder that price `site`: its [tco] site_prices entry's
    source in place of the fleet's (a flat entry reads no price file, so no data folder), else
    the fleet's own. The rest of the settings (demand rate, uplifts, capital) are the fleet's."""
    own = parse_site_prices(settings.site_prices).get(site)
    if own is None:
        return settings, data_dir
    source: dict[str, Any] = {"tariff_file": own.tariff_file, "tariff_tier": own.tariff_tier,
                              "tariff_timezone": own.timezone, "site_prices": ()}
    if own.kind == "flat":
        return dataclasses.replace(settings, price_file="", flat_price_usd_per_mwh=own.flat_price_usd_per_mwh,
                                   **source), None
    if own.kind == "market":
        if not (own.price_file or settings.price_file or data_dir is not None):
            # hourly_prices would price the site at the fleet's flat price, unsaid
            raise ValueError(f"[tco] site_prices: site {site!r} is priced at market node {own.price_node!r} but no "
                             "price file is named (the entry's PRICE_FILE, [tco] price_file or the reference data)")
        return dataclasses.replace(settings, price_file=own.price_file or settings.price_file,
                                   price_node=own.price_node, **source), data_dir
    return dataclasses.replace(settings, **source), data_dir
