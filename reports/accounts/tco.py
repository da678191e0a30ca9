"""Cost accounts of one day (total cost of ownership), attributed to jobs, users, teams, stages.

Per metered GPU-hour, USD:
    energy_cost       = energy_kwh x PUE x price(site, hour)   (negative prices and spikes kept; the
                        site's own [tco] site_prices source where it has one, else the fleet's:
                        reports.accounts.site_prices)
    demand_charge     = rate x what the day adds to the month's peak site kW (reports/accounts/demand.py:
                        the month's days add up to rate x the month's peak), on the GPU-hours of
                        the day's peak hour pro rata by their meter energy (the coincident-peak
                        rule: who draws at the peak pays for it); the billing month is the local
                        one of the site's time zone (its site_prices entry's, else tariff_timezone).
                        None (NULL) for a GPU at no site ("unknown": reports.accounts.fleet_hours.
                        unplaced): no utility meters it; its energy is priced at the fleet's
                        source all the same, and a note names those GPUs
    green_premium     = ratio x max(energy_cost, 0) when the region's renewable share in that
                        hour is below the threshold (no premium where the share is unknown;
                        NULL where the energy cost is)
    density_surcharge = ratio(rack kW) x max(energy_cost + demand_charge, 0); ratio 0 below
                        25 kW, 0.12 at 25-35 kW, 0.28 above, on the provisioned TcoSettings.rack_kw
    capital           = (GPU price + server price / gpus_per_server) / lifetime hours, none
                        before purchased_on or once the lifetime is over
                        (reports.accounts.embodied.amortised_share)
    operations        = that capital base x operations_ratio_of_capex_per_year / 8760
Capital and operations are charged on every hour of the day of every GPU in the fleet, read or
not (reports.accounts.fleet_hours): an hour without a reading carries them and no energy, and
counts in unmetered_gpu_hours, as does an hour whose readings were too few to measure its energy
(fct_gpu_energy_hourly.energy_kwh NULL). A job's energy and energy-driven costs are those of its
measured hours, NULL where none was measured (reports.accounts.attribution.sum_known).
static_energy_cost prices the same energy at the flat average of the day's metered hours (the
unweighted mean of their hourly prices: on a full day, the day's mean; on a day the fleet's data
covers in part, the mean of the hours it covers; a site with its own price source, its own
mean), for the static-vs-dynamic comparison.
energy_kwh is the IT energy of reports.accounts.it_energy_basis (BMC energy where usable, else GPU board).
Range: total_cost_low/high_usd = total -/+ u_price x |energy cost + green premium + density
surcharge| (the components that move with the price; u_price = price_uncertainty_pct / 100);
capital, operations and the demand charge are contract rates, not moved.
The day's hourly prices (rpt_context_price_hourly) and the cheapest-hours shifting estimate
(rpt_shift_cost_daily): reports.accounts.site_hours, reports.accounts.shift.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from joulehouse.reports.accounts.attribution import (GPU_KEYS, UNALLOCATED, account_by_gpu, account_total,
                                                     empty_account, empty_by_gpu)
from joulehouse.reports.accounts.demand import (NO_METER, allocate, allocated_demand_charge, day_peaks, later_days_accounted,
                                                month_peak_before, other_interval_notes, read_meter_intervals,
                                                site_hour_kw, store_peaks, with_interval_minutes)
from joulehouse.reports.accounts.fleet_hours import (known_sites, siteless_fleet_note, unplaced, unplaced_gpus,
                                                     unplaced_note)
from joulehouse.reports.accounts.embodied import HOURS_PER_YEAR, amortised_share, capital_usd_per_gpu_hour
from joulehouse.reports.accounts.hour_factors import attach_intensity, attach_pue
from joulehouse.reports.accounts.it_energy_basis import BASIS_AMOUNTS, label_basis, with_facility_energy
from joulehouse.reports.accounts.prices import DEFAULT_PRICE_FILE, load_pjm_lmp_csv, load_urdb_tariff, tariff_prices
from joulehouse.reports.accounts.settings import TcoSettings
from joulehouse.reports.accounts.shift import cost_shift_rows
from joulehouse.reports.accounts.site_prices import PriceSource, added_counts, per_source, price_sources
from joulehouse.reports.accounts.site_hours import day_site_hours, price_context
from joulehouse.models.settings import JOB_MAX_DAYS
from joulehouse.reports.accounts.warehouse_io import day_bounds, prepare_day, replace_report_day
from joulehouse.reports.accounts.yearmap import map_to_target_hours, rule_counts

FLOP_PER_TFLOP_HOUR = 1e12 * 3600.0
COST_COMPONENTS = ["energy_cost_usd", "demand_charge_usd", "green_premium_usd", "density_surcharge_usd",
                   "capital_usd", "operations_usd"]
TCO_AMOUNTS = ["energy_kwh", "facility_energy_kwh", *COST_COMPONENTS, "static_energy_cost_usd", *BASIS_AMOUNTS,
               "unmetered_gpu_hours", "demand_charge_other_month_usd"]
PRICE_DRIVEN = ["energy_cost_usd", "green_premium_usd", "density_surcharge_usd"]
# amounts of calendar time in the fleet, split among jobs by time held (the others follow the energy)
CALENDAR_AMOUNTS = ("capital_usd", "operations_usd", "unmetered_gpu_hours")
# rpt_tco_by_gpu_daily: the accounts' amounts per (day, job_id, gpu_model, site)
BY_GPU_AMOUNTS = ["energy_kwh", "total_cost_usd"]


def density_surcharge_ratio(rack_kw: float, settings: TcoSettings) -> float:
    """Uplift on the facility bill by rack density: 0 below 25 kW, 25-35 kW inclusive, above 35."""
    if rack_kw > 35.0:
        return settings.density_surcharge_over_35kw_ratio
    if rack_kw >= 25.0:
        return settings.density_surcharge_25_35kw_ratio
    return 0.0


def hourly_prices(hours: pl.Series, settings: TcoSettings, data_dir: Path | None) -> tuple[pl.DataFrame, dict[str, int], str]:
    """price_usd_per_kwh per UTC hour: the tariff if set, else the market price file (year-mapped),
    else the flat price. Returns the frame, rule counts and a sentence naming the source."""
    if settings.tariff_file:
        tariff = load_urdb_tariff(Path(settings.tariff_file), settings.tariff_tier)
        frame = tariff_prices(tariff, hours, settings.tariff_timezone).select("hour_at", "price_usd_per_kwh")
        tier = f", {tariff.tier_note}" if tariff.tier_note else ""
        return frame, {"tariff": frame.height}, f"time-of-use tariff {tariff.name!r} ({tariff.utility}), {settings.tariff_timezone}{tier}"
    path = Path(settings.price_file) if settings.price_file else (
        Path(data_dir) / DEFAULT_PRICE_FILE if data_dir is not None else None)
    if path is None:
        frame = pl.DataFrame({"hour_at": hours.cast(pl.Datetime("us", "UTC"))}).with_columns(
            pl.lit(settings.flat_price_usd_per_mwh / 1000.0).alias("price_usd_per_kwh"))
        return frame, {"flat": frame.height}, f"flat {settings.flat_price_usd_per_mwh} $/MWh"
    lmp = load_pjm_lmp_csv(path, settings.price_node)
    mapped = map_to_target_hours(lmp, hours, ["price_usd_per_mwh"], {"price_usd_per_mwh": settings.flat_price_usd_per_mwh})
    frame = mapped.select("hour_at", (pl.col("price_usd_per_mwh") / 1000.0).alias("price_usd_per_kwh"))
    return frame, rule_counts(mapped), f"{path.name} node {settings.price_node}, year-mapped"


def with_calendar_costs(gpu_hours: pl.DataFrame, settings: TcoSettings) -> pl.DataFrame:
    """Add capital_usd and operations_usd: what an hour of a GPU in the fleet costs whatever it drew
    (needs hour_at, purchased_on, purchase_price_usd, lifetime_years)."""
    capex_per_gpu = (pl.col("purchase_price_usd").fill_null(settings.gpu_capex_usd)
                     + settings.server_capex_usd / settings.gpus_per_server)
    lifetime = pl.col("lifetime_years").fill_null(settings.lifetime_years)
    capital_usd_per_gpu_hour(1.0, 0.0, settings.gpus_per_server, settings.lifetime_years)  # validates settings
    return gpu_hours.with_columns(
        (capex_per_gpu / (lifetime * HOURS_PER_YEAR) * amortised_share(lifetime)).alias("capital_usd"),
        (capex_per_gpu * settings.operations_ratio_of_capex_per_year / HOURS_PER_YEAR).alias("operations_usd"),
    )


def unplaced_cost_sentence(gpus: pl.DataFrame, price_source: str, settings: TcoSettings) -> str:
    """What the cost account assumed for the GPUs placed at no site (fleet_hours.unplaced_gpus)."""
    unpriced = gpus.filter(pl.col("purchase_price_usd").is_null()).height
    undated = gpus.filter(pl.col("purchased_on").is_null()).height
    return (f"energy priced at the fleet's source ({price_source}); capital at [tco] gpu_capex_usd "
            f"{settings.gpu_capex_usd:g} USD for the {unpriced} without a purchase price, {undated} without a purchase "
            "date amortised without end; no demand charge (NULL): no utility meters a site that is not one, so their "
            "energy at the meter is in no site's demand peak (where they stand at a site billed by IT x PUE, that "
            "site's bill is higher than its charge)")


def cost_per_gpu_hour(gpu_hours: pl.DataFrame, settings: TcoSettings, peaks: pl.DataFrame | None = None,
                      unmetered: pl.DataFrame | None = None) -> pl.DataFrame:
    """GPU-hours with pue, price_usd_per_kwh, renewable_pct, purchase_price_usd, lifetime_years
    -> the TCO_AMOUNTS columns. `peaks`: the site-days' demand rows (reports.accounts.demand.day_peaks);
    None: the GPU-hours' own peaks, no meter and no earlier day of the month. `unmetered`: the
    fleet's hours without a reading: capital and operations, unmetered_gpu_hours 1, NULL energy
    and energy-driven costs (nothing was read, nothing is priced)."""
    base = with_facility_energy(gpu_hours)
    base = base.with_columns(
        (pl.col("facility_energy_kwh") * pl.col("price_usd_per_kwh")).alias("energy_cost_usd"),
        # the plain mean of the day's hourly prices: each hour once, however many GPU-hours it holds
        (pl.col("facility_energy_kwh") * pl.col("price_usd_per_kwh").filter(pl.struct("day", "hour_at").is_first_distinct())
         .mean().over("day")).alias("static_energy_cost_usd"),
    )
    # the unread hours share the demand charge too: a peak the meter saw while no GPU was read
    # (reports.accounts.demand.site_hour_kw) falls on them, and nowhere else
    unread = unmetered if unmetered is not None and unmetered.height else None
    both = base if unread is None else pl.concat(
        [base.with_columns(pl.lit(False).alias("_unread")), unread.with_columns(pl.lit(True).alias("_unread"))],
        how="diagonal_relaxed")
    if peaks is None:
        both, _ = allocated_demand_charge(both, NO_METER, 1.0, {}, settings.demand_charge_usd_per_kw_month,
                                          settings.tariff_timezone)
    else:
        both = allocate(both, peaks, settings.tariff_timezone)
    if unread is not None:
        demand_columns = ["demand_charge_usd", "demand_charge_other_month_usd"]
        base = both.filter(~pl.col("_unread")).select(*base.columns, *demand_columns)
        unread = both.filter(pl.col("_unread")).select(*unread.columns, *demand_columns)
    else:
        base = both
    density = density_surcharge_ratio(settings.rack_kw, settings)
    energy_cost, demand = pl.col("energy_cost_usd"), pl.col("demand_charge_usd")
    metered = with_calendar_costs(base, settings).with_columns(
        # no premium (0) where renewables are plentiful or their share is unknown, but only on an
        # energy cost that is known: the premium of an unknown energy cost is unknown (NULL)
        pl.when(energy_cost.is_null()).then(None)
        .when(pl.col("renewable_pct") < settings.green_premium_below_renewable_pct)
        .then(settings.green_premium_ratio * energy_cost.clip(lower_bound=0.0))
        .otherwise(0.0).alias("green_premium_usd"),
        # on the known parts of the bill: a demand charge allocated to a GPU-hour whose energy is
        # unknown (demand.allocate) still carries its surcharge; nothing known, NULL
        pl.when(energy_cost.is_not_null() | (demand.fill_null(0.0) != 0))
        .then(density * (energy_cost.fill_null(0.0) + demand.fill_null(0.0)).clip(lower_bound=0.0))
        .alias("density_surcharge_usd"),
        # a GPU-hour whose energy was not measured (too few readings to bridge) counts as unmetered,
        # as an hour without a reading does: the row's energy amounts leave it out
        pl.col("energy_kwh").is_null().cast(pl.Float64).alias("unmetered_gpu_hours"),
    )
    if unread is None:
        return metered
    unread = with_calendar_costs(unread, settings).with_columns(
        pl.lit(1.0).alias("unmetered_gpu_hours"),
        # the demand charge of a peak hour without readings carries its surcharge (no energy cost)
        pl.when(pl.col("demand_charge_usd").fill_null(0.0) != 0)
        .then(density * pl.col("demand_charge_usd").clip(lower_bound=0.0)).alias("density_surcharge_usd"))
    return pl.concat([metered, unread], how="diagonal_relaxed")


def with_unit_costs(rows: pl.DataFrame) -> pl.DataFrame:
    """Add total_cost_usd, cost_per_gpu_hour_usd and cost_per_tflop_hour_usd (NULL without FLOPs)."""
    rows = rows.with_columns(pl.sum_horizontal(COST_COMPONENTS).alias("total_cost_usd"))
    return rows.with_columns(
        pl.when(pl.col("gpu_hours") > 0).then(pl.col("total_cost_usd") / pl.col("gpu_hours")).alias("cost_per_gpu_hour_usd"),
        pl.when(pl.col("flops_total") > 0)
        .then(pl.col("total_cost_usd") / (pl.col("flops_total") / FLOP_PER_TFLOP_HOUR)).alias("cost_per_tflop_hour_usd"),
    )


def with_cost_range(rows: pl.DataFrame, settings: TcoSettings) -> pl.DataFrame:
    """Add total_cost_low_usd / total_cost_high_usd (see the module docstring) and it_energy_basis."""
    if settings.price_uncertainty_pct < 0:
        raise ValueError(f"price_uncertainty_pct={settings.price_uncertainty_pct}: expected >= 0")
    swing = settings.price_uncertainty_pct / 100.0 * pl.sum_horizontal([pl.col(c).abs() for c in PRICE_DRIVEN])
    return label_basis(rows.with_columns((pl.col("total_cost_usd") - swing).alias("total_cost_low_usd"),
                                         (pl.col("total_cost_usd") + swing).alias("total_cost_high_usd")))


def account_cost_by_gpu(gpu_hours: pl.DataFrame, jobs: pl.DataFrame, settings: TcoSettings,
                        peaks: pl.DataFrame | None = None,
                        unmetered: pl.DataFrame | None = None,
                        energy_shares: pl.DataFrame | None = None,
                        sources: list[PriceSource] | None = None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Pure: GPU-hours with context and jobs -> (rpt_tco_daily rows, day x team x user x job x
    stage; the same amounts at (day, job_id, gpu_model, site): the rows of rpt_tco_by_gpu_daily,
    reports.accounts.attribution.account_by_gpu). `sources`: the sites' price sources
    (reports.accounts.site_prices), whose time zones bill the demand charge; None: `settings`' alone."""
    several = sources is not None and len(sources) > 1

    def priced(part: pl.DataFrame, source: PriceSource) -> pl.DataFrame:
        # the plain mean price (static_energy_cost_usd) and the billing months are each source's own
        own_unmetered = unmetered.filter(pl.col("site").is_in(list(source.sites))) if several and unmetered is not None \
            else unmetered
        return cost_per_gpu_hour(part, source.settings, peaks, own_unmetered)

    per_hour = per_source(gpu_hours, sources or [PriceSource((), settings, None)], priced)
    grouped, by_gpu = account_by_gpu(per_hour, jobs, TCO_AMOUNTS, settings.idle_policy, energy_shares,
                                     CALENDAR_AMOUNTS)
    by_gpu = by_gpu.with_columns(pl.sum_horizontal(COST_COMPONENTS).alias("total_cost_usd"))
    return with_cost_range(with_unit_costs(grouped), settings), by_gpu.select(*GPU_KEYS, *BY_GPU_AMOUNTS)


@dataclass
class TcoSummary:
    """One day's cost account, USD, and how it was computed."""

    day: dt.date
    rows_written: int
    gpu_hours: float
    unmetered_gpu_hours: float
    energy_kwh: float | None  # None: no GPU-hour's value known
    facility_energy_kwh: float | None  # None: no GPU-hour's value known
    components_usd: dict[str, float | None]  # None: no GPU-hour's amount known
    total_cost_usd: float
    total_cost_low_usd: float
    total_cost_high_usd: float
    cost_per_gpu_hour_usd: float | None
    dynamic_energy_cost_usd: float | None  # None: no GPU-hour's value known
    static_energy_cost_usd: float | None  # None: no GPU-hour's value known
    peak_site_kw: float | None
    shift_saving_usd: float
    unallocated_cost_usd: float
    price_rule_counts: dict[str, int]
    pue_default_gpu_hours: int
    method: str
    notes: list[str] = field(default_factory=list)


def tco_day(con, day: dt.date, settings: TcoSettings, data_dir: Path | None, *,
            job_max_days: int = JOB_MAX_DAYS, max_meter_gap_s: float | None = None) -> TcoSummary:
    """Account one day's cost: read the warehouse, compute, replace the day in rpt_tco_daily.
    `max_meter_gap_s`: the build's [warehouse] max_meter_gap_s (None: its default), for the demand intervals."""
    prepared = prepare_day(con, day, settings, job_max_days)  # models.job_max_days, as the efficiency step
    inputs, jobs, ctx, notes = prepared.inputs, prepared.jobs, prepared.gpu_hours, prepared.notes
    ctx, _, grid_sources = attach_intensity(ctx, settings.grid_file, data_dir, "direct", 0.0, settings.region)
    unknown_share = ctx.filter(pl.col("renewable_pct").is_null()).height
    if unknown_share:
        notes.append(f"{unknown_share} GPU-hours without a renewable share: no green premium applied to them")
    start, _ = day_bounds(day)
    day_hours = pl.Series("hour_at", [start + dt.timedelta(hours=h) for h in range(24)], dtype=pl.Datetime("us", "UTC"))
    hours = pl.concat([day_hours, ctx["hour_at"].cast(pl.Datetime("us", "UTC"))]).unique().sort()
    unread = prepared.unmetered_hours
    day_sites = pl.concat([ctx["site"], *([unread["site"]] if unread is not None else [])]).unique().to_list()
    sources, source_notes = price_sources(settings, data_dir, day_sites)
    notes.extend(source_notes)
    # each source's (hour_at, price_usd_per_kwh), rule counts and sentence, by its site ("" the fleet's)
    priced = {source.site: hourly_prices(hours, source.settings, source.data_dir) for source in sources}
    ctx = per_source(ctx, sources, lambda part, source: part.join(priced[source.site][0], on="hour_at", how="left"))
    meter_intervals = read_meter_intervals(con, day, inputs.pue, settings.demand_interval_minutes, max_meter_gap_s, notes)
    # no utility meters a GPU at no site: no demand row, and its GPU-hours' demand charge NULL (allocate)
    sites = known_sites(inputs.pue["site"].unique().to_list(), [ctx, unread])
    unplaced_hours = unplaced_gpus([ctx, unread], sites)
    notes.extend(siteless_fleet_note(sites, [ctx, unread]))
    fleet_price = priced[""][2] if "" in priced else "[tco] site_prices' entry for it"
    notes.extend(unplaced_note(unplaced_hours, unplaced_cost_sentence(unplaced_hours, fleet_price, settings)))
    site_kw = per_source(with_facility_energy(ctx.filter(~unplaced(sites))), sources, lambda part, source: site_hour_kw(
        part, inputs.pue, settings.node_energy_min_coverage_ratio, source.settings.tariff_timezone, meter_intervals))
    peak_before: dict[tuple[str, dt.date], float] = {}
    later: set[dt.date] = set()
    for source in sources:  # each source's billing months, in its time zone
        zone = source.settings.tariff_timezone
        peak_before.update({key: kw for key, kw in month_peak_before(con, day, zone).items()
                            if len(sources) == 1 or key[0] in source.sites})
        later.update(later_days_accounted(con, day, zone))
    peaks = with_interval_minutes(day_peaks(site_kw, peak_before, settings.demand_charge_usd_per_kw_month),
                                  meter_intervals, settings.demand_interval_minutes)
    store_peaks(con, day, peaks)
    notes.extend(other_interval_notes(con, day))
    if later:
        first, last = min(later), max(later)
        notes.append(f"{len(later)} later day(s) of this month were accounted before this one ({first} to "
                     f"{last}): their demand charges assumed this day's earlier peak; re-run them in order "
                     "to restate the month")
    highest = peaks["peak_kw"].max() if peaks.height else (None if unplaced_hours.height else 0.0)
    peak_kw = float(highest) if highest is not None else None  # no hour's demand known
    if prepared.has_hours_to_account(ctx, "capital and operations"):
        rows, by_gpu = account_cost_by_gpu(ctx, jobs, settings, peaks, unread, prepared.energy_shares, sources)
    else:
        rows = with_cost_range(with_unit_costs(empty_account(TCO_AMOUNTS)), settings)
        by_gpu = empty_by_gpu(BY_GPU_AMOUNTS)
    written = replace_report_day(con, "rpt_tco_daily", day, rows, together={"rpt_tco_by_gpu_daily": by_gpu})
    site_hours, _ = attach_pue(day_site_hours(ctx, day), inputs.pue, settings.default_pue)
    site_hours, _, _ = attach_intensity(site_hours, settings.grid_file, data_dir, "direct", 0.0,
                                        settings.region)  # the renewable share
    replace_report_day(con, "rpt_context_price_hourly", day, per_source(site_hours, sources, lambda part, source: price_context(
        part, priced[source.site][0], ", ".join(k for k, n in sorted(priced[source.site][1].items()) if n), ctx,
        settings.green_premium_below_renewable_pct)))
    # the cheapest hours of a site are its own source's (shift plans are per site)
    shift = per_source(ctx, sources, lambda part, source: cost_shift_rows(
        part, jobs, site_hours.select("site", "hour_at", "pue"), priced[source.site][0], settings.shift_window_hours,
        prepared.energy_shares))
    price_counts = added_counts([priced[source.site][1] for source in sources])
    price_source = "; ".join(f"{source.site}: {priced[source.site][2]}" if source.site else priced[source.site][2]
                             for source in sources)
    replace_report_day(con, "rpt_shift_cost_daily", day, shift)

    def total(col: str) -> float | None:
        return account_total(rows, col)

    gpu_h = total("gpu_hours")
    method = (
        f"energy at the meter (IT x PUE) priced hour by hour ({price_source}); demand charge "
        f"{settings.demand_charge_usd_per_kw_month} $/kW-month on what the day adds to the month's peak kW "
        f"({settings.demand_interval_minutes}-minute averages; the facility meter where it covered >= "
        f"{settings.node_energy_min_coverage_ratio} of the interval, else the hour's, else IT x PUE), coincident-peak "
        f"allocation; green premium {settings.green_premium_ratio:.0%} below {settings.green_premium_below_renewable_pct}% "
        f"renewable ({'; '.join(grid_sources) or 'no renewable data'}); density surcharge at {settings.rack_kw} kW/rack; "
        f"capital straight-line over {settings.lifetime_years} years, per hour of calendar time in the fleet (read or "
        f"not); operations "
        f"{settings.operations_ratio_of_capex_per_year:.0%} of capital per year; idle policy {settings.idle_policy}; "
        f"IT energy at the server's BMC where it covered >= {settings.node_energy_min_coverage_ratio} of the hour, "
        f"else GPU board energy; range +/-{settings.price_uncertainty_pct}% on the price-driven components; "
        "shifting estimate: deferrable jobs' energy moved to the day's lowest PUE x price hours within idle GPU-hours"
    )
    return TcoSummary(
        day=day, rows_written=written, gpu_hours=gpu_h, unmetered_gpu_hours=total("unmetered_gpu_hours"),
        energy_kwh=total("energy_kwh"),
        facility_energy_kwh=total("facility_energy_kwh"),
        components_usd={c: total(c) for c in COST_COMPONENTS}, total_cost_usd=total("total_cost_usd"),
        total_cost_low_usd=total("total_cost_low_usd"), total_cost_high_usd=total("total_cost_high_usd"),
        shift_saving_usd=float(shift["cost_saving_usd"].sum()) if shift.height else 0.0,
        cost_per_gpu_hour_usd=total("total_cost_usd") / gpu_h if gpu_h else None,
        dynamic_energy_cost_usd=total("energy_cost_usd"), static_energy_cost_usd=total("static_energy_cost_usd"),
        peak_site_kw=peak_kw,
        unallocated_cost_usd=float(rows.filter(pl.col("job_id") == UNALLOCATED)["total_cost_usd"].sum()) if rows.height else 0.0,
        price_rule_counts=price_counts, pue_default_gpu_hours=prepared.pue_defaulted, method=method, notes=notes,
    )
