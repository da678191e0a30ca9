"""Carbon accounts of one day: GHG Protocol scope 2 (location- and market-based) plus embodied,
attributed to jobs, users, teams and stages.

Per metered GPU-hour (all in gCO2e unless named otherwise):
    energy_kwh          = IT energy: the server's BMC energy split by GPU share where usable,
                          else the GPU board energy (reports.accounts.it_energy_basis; it_energy_basis says which)
    facility_energy_kwh = energy_kwh x PUE(site, hour)
    location_gco2e      = facility_energy_kwh x grid intensity(region, hour)
    market_gco2e        = facility_energy_kwh x (c x contract intensity + (1 - c) x residual mix)
        where c = min(1, contract kWh for the site-day / site facility kWh of the day): contracts
        (PPA/REC) are applied first, pro rata over the day's hours, the region's residual mix
        (reports.accounts.residual_mix: AIB's published table) covers the rest; NULL where that
        mix is not available. market_basis says which contracts and mix were used. A GPU at no
        site (reports.accounts.fleet_hours.unplaced) holds no contract (c = 0); its region is
        [carbon] region where the inventory gives none, and a note names those GPUs.
    embodied_gco2e      = amortised GPU + server share (reports.accounts.embodied), idle hours included.
Every hour of the day of every GPU in the fleet carries its embodied carbon, read or not: an hour
without a reading (reports.accounts.fleet_hours) has no energy and no operational carbon (NULL),
and counts in unmetered_gpu_hours, as does an hour whose readings were too few to measure its energy
(fct_gpu_energy_hourly.energy_kwh NULL). A job's energy and operational carbon are those of its
measured hours, NULL where none was measured (reports.accounts.attribution.sum_known).
Range: operational relative uncertainty u_op = sqrt(u_grid^2 + u_pue^2) (independent inputs);
embodied u_emb; low/high of the total = location x (1 -/+ u_op) + embodied x (1 -/+ u_emb).
Attribution and the idle policy: reports.accounts.attribution. The day's hourly context
(rpt_context_grid_hourly) and the cleanest-hours shifting estimate (rpt_shift_carbon_daily):
reports.accounts.site_hours, reports.accounts.shift.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from joulehouse.reports.accounts.attribution import (GPU_KEYS, UNALLOCATED, account_by_gpu, account_total,
                                                     empty_account, empty_by_gpu)
from joulehouse.reports.accounts.fleet_hours import (known_sites, siteless_fleet_note, unplaced, unplaced_gpus,
                                                     unplaced_note)
from joulehouse.reports.accounts.embodied import amortised_share, default_gpu_embodied_kgco2e, embodied_gco2e_per_gpu_hour
from joulehouse.reports.accounts.hour_factors import attach_intensity, attach_pue
from joulehouse.reports.accounts.residual_mix import ResidualMix, residual_mix_for
from joulehouse.reports.accounts.it_energy_basis import BASIS_AMOUNTS, label_basis, with_facility_energy
from joulehouse.reports.accounts.settings import CarbonSettings, parse_contracts, parse_model_overrides
from joulehouse.reports.accounts.shift import carbon_shift_rows
from joulehouse.reports.accounts.site_hours import day_site_hours, grid_context
from joulehouse.models.settings import JOB_MAX_DAYS
from joulehouse.reports.accounts.warehouse_io import prepare_day, replace_report_day

CARBON_AMOUNTS = ["energy_kwh", "facility_energy_kwh", "location_gco2e", "market_gco2e", "embodied_gco2e", *BASIS_AMOUNTS,
                  "unmetered_gpu_hours"]
# amounts of calendar time in the fleet, split among jobs by time held (the others follow the energy)
CALENDAR_AMOUNTS = ("embodied_gco2e", "unmetered_gpu_hours")
# rpt_carbon_by_gpu_daily: the accounts' amounts per (day, job_id, gpu_model, site)
BY_GPU_AMOUNTS = ["energy_kwh", "gpu_energy_kwh", "location_gco2e", "market_gco2e", "embodied_gco2e"]


def contract_for_site_day(settings: CarbonSettings, site: str, day: dt.date) -> tuple[float, float]:
    """(kWh available, volume-weighted gCO2e/kWh) of all contracts for a site and day.
    `market_contract_kwh_per_day` is a contract every site holds every day."""
    volumes = [(c.kwh_on(day), c.gco2e_per_kwh) for c in parse_contracts(settings.market_contracts) if c.site == site]
    volumes.append((settings.market_contract_kwh_per_day, settings.market_contract_gco2e_per_kwh))
    total = sum(v for v, _ in volumes)
    return total, (sum(v * i for v, i in volumes) / total if total > 0 else 0.0)


def unmatched_contract_notes(settings: CarbonSettings, day: dt.date, day_sites: set[str]) -> list[str]:
    """A note for each contract with volume on `day` for a site no GPU of the day's fleet is at (a
    typo, a site gone): it covers nothing, and the market-based figure would say nothing of why."""
    unmatched = sorted({c.site for c in parse_contracts(settings.market_contracts)
                        if c.kwh_on(day) > 0 and c.site not in day_sites})
    return [f"[carbon] market_contracts names {', '.join(map(repr, unmatched))}, which no GPU of the day's fleet "
            f"is at (its sites: {', '.join(sorted(day_sites)) or 'none'}): "
            f"{'that contract' if len(unmatched) == 1 else 'those contracts'} covered nothing"] if unmatched else []


def residual_mixes(gpu_hours: pl.DataFrame, settings: CarbonSettings) -> dict[tuple[dt.date, str], ResidualMix]:
    """The residual mix of each (day, region) of the GPU-hours: the table's, or the setting's."""
    out = {}
    for day, region in gpu_hours.select("day", "region").unique().iter_rows():
        out[(day, region)] = (residual_mix_for(region, day.year) if settings.residual_mix_from == "table" else
                              ResidualMix(region or "unknown", settings.residual_mix_gco2e_per_kwh, None,
                                          "[carbon].residual_mix_gco2e_per_kwh"))
    return out


def market_basis(gpu_hours: pl.DataFrame, settings: CarbonSettings) -> str:
    """One sentence: the contracts and the residual mix market-based carbon used (the report's card)."""
    covered = gpu_hours["contract_covered_ratio"].max() if "contract_covered_ratio" in gpu_hours.columns and gpu_hours.height else 0
    contracts = ("energy contracts (PPA/REC) first" if covered and covered > 0 else "no energy contracts (PPA/REC)")
    mixes = sorted({m.sentence for m in residual_mixes(gpu_hours, settings).values()})
    return contracts + "; " + ("; ".join(mixes) or "no residual mix needed")


def market_based(gpu_hours: pl.DataFrame, settings: CarbonSettings) -> pl.DataFrame:
    """Add `contract_covered_ratio` and `market_gco2e` (needs day, site, region, facility_energy_kwh):
    NULL where the residual mix is not available and a contract does not cover all the energy.
    A GPU-hour `at_no_site` (reports.accounts.fleet_hours.unplaced; the column where carbon_day
    marks them) holds no contract: contracts are a site's, and "unknown" is none (given each
    site's market_contract_kwh_per_day, it covered energy no contract bought)."""
    site_days = gpu_hours.group_by(["day", "site"]).agg(pl.col("facility_energy_kwh").sum().alias("_site_kwh"))
    rows = []
    for day, site, site_kwh in site_days.iter_rows():
        kwh, intensity = contract_for_site_day(settings, site, day)
        covered = min(1.0, kwh / site_kwh) if site_kwh > 0 else 0.0
        rows.append((day, site, covered, intensity))
    cover = pl.DataFrame(rows, schema={"day": pl.Date, "site": pl.String, "contract_covered_ratio": pl.Float64,
                                       "_contract_gco2e_per_kwh": pl.Float64}, orient="row")
    mixes = pl.DataFrame([(d, r, m.gco2e_per_kwh) for (d, r), m in residual_mixes(gpu_hours, settings).items()],
                         schema={"day": pl.Date, "region": pl.String, "_residual_gco2e_per_kwh": pl.Float64}, orient="row")
    uncovered = 1.0 - pl.col("contract_covered_ratio")
    at_no_site = pl.col("at_no_site").fill_null(False) if "at_no_site" in gpu_hours.columns else pl.lit(False)
    return (
        gpu_hours.join(cover, on=["day", "site"], how="left")
        .join(mixes, on=["day", "region"], how="left", nulls_equal=True)
        .with_columns(pl.when(at_no_site).then(0.0).otherwise(pl.col("contract_covered_ratio"))
                      .alias("contract_covered_ratio"))
        .with_columns(
            (pl.col("facility_energy_kwh") * (
                pl.col("contract_covered_ratio") * pl.col("_contract_gco2e_per_kwh")
                + pl.when(uncovered > 0).then(uncovered * pl.col("_residual_gco2e_per_kwh")).otherwise(0.0)
            )).alias("market_gco2e")
        )
        .drop("_contract_gco2e_per_kwh", "_residual_gco2e_per_kwh")
    )


def embodied_per_gpu_hour(gpu_hours: pl.DataFrame, settings: CarbonSettings) -> pl.DataFrame:
    """Add `embodied_gco2e` per GPU-hour from the inventory, else the model table / settings;
    none once the GPU's lifetime is over (reports.accounts.embodied.amortised_share)."""
    overrides = parse_model_overrides(settings.embodied_kgco2e_by_gpu_model)
    per_gpu = gpu_hours.select("gpu_uuid", "gpu_model", "embodied_kgco2e", "lifetime_years").unique("gpu_uuid")
    rows = []
    for uuid, model, kg, years in per_gpu.iter_rows():
        gpu_kg = kg if kg is not None else default_gpu_embodied_kgco2e(model, settings.embodied_kgco2e_per_gpu, overrides)
        rows.append((uuid, embodied_gco2e_per_gpu_hour(
            gpu_kg, settings.embodied_kgco2e_per_server, settings.gpus_per_server,
            years if years is not None else settings.lifetime_years)))
    rates = pl.DataFrame(rows, schema={"gpu_uuid": pl.String, "embodied_gco2e": pl.Float64}, orient="row")
    share = amortised_share(pl.col("lifetime_years").fill_null(settings.lifetime_years))
    return gpu_hours.join(rates, on="gpu_uuid", how="left").with_columns(pl.col("embodied_gco2e") * share)


def unplaced_carbon_sentence(hours: pl.DataFrame, gpus: pl.DataFrame, settings: CarbonSettings) -> str:
    """What the carbon account assumed for the GPUs placed at no site: `hours` their read GPU-hours
    (with region), `gpus` fleet_hours.unplaced_gpus's rows."""
    regions = ", ".join(sorted(map(repr, hours["region"].drop_nulls().unique().to_list()))) or "none (never read)"
    defaulted = gpus.filter(pl.col("embodied_kgco2e").is_null()).height
    undated = gpus.filter(pl.col("purchased_on").is_null()).height
    return (f"carbon at grid region {regions} ([carbon] region {settings.region!r} where the inventory gives "
            "none), with no energy contract (a contract is a site's: the residual mix covers their energy); embodied "
            f"carbon at the GPU model's default for the {defaulted} without embodied_kgco2e, {undated} without a "
            "purchase date amortised without end")


def carbon_per_gpu_hour(gpu_hours: pl.DataFrame, settings: CarbonSettings,
                        unmetered: pl.DataFrame | None = None) -> pl.DataFrame:
    """GPU-hours with pue and intensity_gco2e_per_kwh attached -> the CARBON_AMOUNTS columns.
    `unmetered`: the fleet's hours without a reading (inventory columns only): embodied carbon,
    unmetered_gpu_hours 1, and NULL energy and operational carbon (nothing was read)."""
    with_energy = with_facility_energy(gpu_hours).with_columns(
        (pl.col("facility_energy_kwh") * pl.col("intensity_gco2e_per_kwh")).alias("location_gco2e"))
    # a GPU-hour whose energy was not measured (too few readings to bridge) counts as unmetered, as
    # an hour without a reading does: the row's energy and operational carbon leave it out
    metered = embodied_per_gpu_hour(market_based(with_energy, settings), settings).with_columns(
        pl.col("energy_kwh").is_null().cast(pl.Float64).alias("unmetered_gpu_hours"))
    if unmetered is None or unmetered.height == 0:
        return metered
    unread = embodied_per_gpu_hour(unmetered, settings).with_columns(pl.lit(1.0).alias("unmetered_gpu_hours"))
    return pl.concat([metered, unread], how="diagonal_relaxed")


def with_range(rows: pl.DataFrame, settings: CarbonSettings) -> pl.DataFrame:
    """Add total_gco2e, total_market_gco2e and the low/high range of total_gco2e."""
    u_op = math.hypot(settings.grid_uncertainty_pct, settings.pue_uncertainty_pct) / 100.0
    u_emb = settings.embodied_uncertainty_pct / 100.0
    # two uncertainties of up to 100% each add to more than 100% (hypot): emissions stay >= 0
    low_op, low_emb = max(0.0, 1 - u_op), max(0.0, 1 - u_emb)

    def plus(operational: pl.Expr, embodied: pl.Expr) -> pl.Expr:
        # the known parts: a row whose energy was never measured (operational NULL) still carries its
        # embodied carbon, as the cost's total carries capital (sum_horizontal); NULL if neither is known
        return (pl.when(operational.is_null() & embodied.is_null()).then(None)
                .otherwise(operational.fill_null(0.0) + embodied.fill_null(0.0)))

    location, market, embodied = pl.col("location_gco2e"), pl.col("market_gco2e"), pl.col("embodied_gco2e")
    return rows.with_columns(
        plus(location, embodied).alias("total_gco2e"),
        plus(market, embodied).alias("total_market_gco2e"),
        plus(location * low_op, embodied * low_emb).alias("total_low_gco2e"),
        plus(location * (1 + u_op), embodied * (1 + u_emb)).alias("total_high_gco2e"),
    )


def account_carbon_by_gpu(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, settings: CarbonSettings,
                          unmetered: pl.DataFrame | None = None,
                          energy_shares: pl.DataFrame | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Pure: GPU-hours with context (day, site, pue, intensity, inventory columns) and jobs ->
    (rows at day x team x user x job x stage with the carbon columns of rpt_carbon_daily, the same
    amounts at (day, job_id, gpu_model, site): the rows of rpt_carbon_by_gpu_daily,
    reports.accounts.attribution.account_by_gpu)."""
    per_hour = carbon_per_gpu_hour(gpu_hours, settings, unmetered)
    grouped, by_gpu = account_by_gpu(per_hour, jobs, CARBON_AMOUNTS, settings.idle_policy, energy_shares,
                                     CALENDAR_AMOUNTS)
    rows = label_basis(with_range(grouped, settings))
    by_gpu = by_gpu.select(*GPU_KEYS, *BY_GPU_AMOUNTS)
    if per_hour.filter(pl.col("market_gco2e").is_null() & pl.col("facility_energy_kwh").is_not_null()).height:
        # Some energy has neither a contract nor a residual mix: a market-based total would be a
        # guess, so the day has none (a sum would count the unknown hours as zero). An hour with
        # no measured energy (NULL: no bridged interval) has no market figure either, and leaves
        # the day's, as it leaves the location-based one.
        rows = rows.with_columns(pl.lit(None, pl.Float64).alias("market_gco2e"), pl.lit(None, pl.Float64).alias("total_market_gco2e"))
        by_gpu = by_gpu.with_columns(pl.lit(None, pl.Float64).alias("market_gco2e"))
    # the basis of the energy's market figure: the read hours' (an unread hour has no energy)
    basis = market_basis(per_hour.filter(pl.col("unmetered_gpu_hours") == 0), settings)
    return rows.with_columns(pl.lit(basis).alias("market_basis")), by_gpu


@dataclass
class CarbonSummary:
    """What one day's carbon account found, in kWh and gCO2e, and how it was computed."""

    day: dt.date
    rows_written: int
    gpu_hours: float
    energy_kwh: float | None  # None: no GPU-hour's value known
    facility_energy_kwh: float | None  # None: no GPU-hour's value known
    location_gco2e: float | None  # None: no GPU-hour's value known
    market_gco2e: float | None
    embodied_gco2e: float | None  # None: no GPU-hour's value known
    unmetered_gpu_hours: float
    total_gco2e: float
    total_low_gco2e: float
    total_high_gco2e: float
    gpu_energy_kwh: float | None  # None: no GPU-hour's value known
    node_ipmi_energy_kwh: float | None  # None: no GPU-hour's value known
    shift_saving_gco2e: float
    unallocated_energy_kwh: float
    intensity_rule_counts: dict[str, int]
    pue_default_gpu_hours: int
    quarantined_jobs: int
    method: str
    notes: list[str] = field(default_factory=list)


def carbon_day(con, day: dt.date, settings: CarbonSettings, data_dir: Path | None, *,
               job_max_days: int = JOB_MAX_DAYS) -> CarbonSummary:
    """Account one day: read the warehouse, compute, replace the day in rpt_carbon_daily."""
    prepared = prepare_day(con, day, settings, job_max_days)  # models.job_max_days, as the efficiency step
    inputs, jobs, with_pue, notes = prepared.inputs, prepared.jobs, prepared.gpu_hours, prepared.notes
    ctx, rule_counts, sources = attach_intensity(
        with_pue, settings.grid_file, data_dir, settings.grid_intensity_basis, settings.default_grid_gco2e_per_kwh,
        settings.region)
    sites = known_sites(inputs.pue["site"].unique().to_list(), [ctx, prepared.unmetered_hours])
    ctx = ctx.with_columns(unplaced(sites).alias("at_no_site"))
    day_sites = {site for frame in (ctx, prepared.unmetered_hours) if frame is not None and frame.height
                 for site in frame.filter(~unplaced(sites))["site"].drop_nulls().to_list()}
    notes.extend(unmatched_contract_notes(settings, day, day_sites))
    notes.extend(siteless_fleet_note(sites, [ctx, prepared.unmetered_hours]))
    unplaced_hours = unplaced_gpus([ctx, prepared.unmetered_hours], sites)
    notes.extend(unplaced_note(unplaced_hours, unplaced_carbon_sentence(ctx.filter(pl.col("at_no_site")),
                                                                        unplaced_hours, settings)))
    if prepared.has_hours_to_account(ctx, "embodied carbon"):
        rows, by_gpu = account_carbon_by_gpu(ctx, jobs, settings, prepared.unmetered_hours, prepared.energy_shares)
    else:
        rows = label_basis(with_range(empty_account(CARBON_AMOUNTS), settings)).with_columns(
            pl.lit(None, pl.String).alias("market_basis"))
        by_gpu = empty_by_gpu(BY_GPU_AMOUNTS)
    written = replace_report_day(con, "rpt_carbon_daily", day, rows, together={"rpt_carbon_by_gpu_daily": by_gpu})
    site_hours, _ = attach_pue(day_site_hours(ctx, day), inputs.pue, settings.default_pue)
    site_hours, _, _ = attach_intensity(
        site_hours, settings.grid_file, data_dir, settings.grid_intensity_basis, settings.default_grid_gco2e_per_kwh,
        settings.region)
    grid = grid_context(site_hours, ctx)
    replace_report_day(con, "rpt_context_grid_hourly", day, grid)
    shift = carbon_shift_rows(ctx, jobs, grid, settings.shift_window_hours, prepared.energy_shares)
    replace_report_day(con, "rpt_shift_carbon_daily", day, shift)

    def total(col: str) -> float | None:
        return account_total(rows, col)

    method = (
        "GHG Protocol scope 2, location-based (grid intensity per region and hour: "
        + ("; ".join(sources) or "none") + ") and market-based ("
        + (rows["market_basis"][0] if rows.height and "market_basis" in rows.columns else "no GPU-hours")
        + "); embodied amortised over lifetime per GPU-hour of calendar time in the fleet, "
        f"idle and unread hours included; idle policy {settings.idle_policy}; IT energy at the server's BMC where it "
        f"covered >= {settings.node_energy_min_coverage_ratio} of the hour, split by GPU energy share, else GPU "
        "board energy; year mapping to the same weekday and hour near the date in the nearest source year; shifting estimate: "
        "deferrable jobs' energy moved to the day's lowest PUE x intensity hours within idle GPU-hours"
    )
    return CarbonSummary(
        day=day, rows_written=written, gpu_hours=total("gpu_hours"), energy_kwh=total("energy_kwh"),
        facility_energy_kwh=total("facility_energy_kwh"), location_gco2e=total("location_gco2e"),
        market_gco2e=total("market_gco2e") if rows.height and rows["market_gco2e"].null_count() < rows.height else None, embodied_gco2e=total("embodied_gco2e"),
        unmetered_gpu_hours=total("unmetered_gpu_hours"), total_gco2e=total("total_gco2e"),
        total_low_gco2e=total("total_low_gco2e"), total_high_gco2e=total("total_high_gco2e"),
        gpu_energy_kwh=total("gpu_energy_kwh"), node_ipmi_energy_kwh=total("node_ipmi_energy_kwh"),
        shift_saving_gco2e=float(shift["carbon_saving_gco2e"].sum()) if shift.height else 0.0,
        unallocated_energy_kwh=float(rows.filter(pl.col("job_id") == UNALLOCATED)["energy_kwh"].sum()) if rows.height else 0.0,
        intensity_rule_counts=rule_counts, pue_default_gpu_hours=prepared.pue_defaulted,
        quarantined_jobs=prepared.quarantined_jobs, method=method, notes=notes,
    )
