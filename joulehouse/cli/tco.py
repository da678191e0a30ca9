"""`joulehouse tco estimate`: the cost of a past or planned run, without telemetry.

A table on a terminal, JSON when piped (or `--format json|csv`): energy_kwh (at the meter),
energy_cost_usd, demand_charge_usd, capital_usd, operations_usd, total_cost_usd,
cost_per_gpu_hour_usd, method. `--gpu-model NAME --gpus N --days D` is enough: power from the GPU
catalogue, price, PUE, capital and lifetime from the settings. The price, as the daily accounts
take it: a flag (--price-usd-per-mwh, or --price-file with --start), else the [tco] tariff over the
run's hours (from --start), else with --start the hourly price file, else the flat price; with
--site, the site's own [tco] site_prices entry stands for the fleet's source, as the daily accounts
resolve it (reports.accounts.settings.site_price_settings), and its time zone bills the demand
charge. Exit code 2 on bad input.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.estimate_command import estimate_command
from joulehouse.cli.options import fail, quoted, refuse_empty
from joulehouse.cli.run_options import (DEFAULT_DATA_DIR, DataDir, GpusPerServer, LifetimeYears, Start, parse_start,
                                        run_hourly_mean, within)

tco_app = typer.Typer(no_args_is_help=True, help="Total cost of ownership.")

TCO_ROWS = (("gpu_hours", "GPU-hours", "GPU-h"), ("avg_power_w", "average power per GPU", "W"),
            ("energy_kwh", "energy at the meter (x PUE)", "kWh"), ("price_usd_per_mwh", "energy price", "USD/MWh"),
            ("energy_cost_usd", "energy", "USD"), ("demand_charge_usd", "demand charge (peak kW)", "USD"),
            ("capital_usd", "capital (depreciation)", "USD"), ("operations_usd", "operations", "USD"),
            ("total_cost_usd", "total cost", "USD"), ("cost_per_gpu_hour_usd", "per GPU-hour", "USD"))


@estimate_command(tco_app, "tco", "cost", TCO_ROWS)
def estimate(
    tco, run, spec, extra: dict, /,
    price_usd_per_mwh: Optional[float] = typer.Option(
        None, help="Flat energy price, USD/MWh (default: \\[tco] flat_price_usd_per_mwh)."),
    price_file: Optional[Path] = typer.Option(None, help="PJM hourly LMP file (with --start), USD/MWh."),
    price_node: Optional[str] = typer.Option(None, help="Pricing node in the price file (default: \\[tco] price_node)."),
    site: Optional[str] = typer.Option(
        None, callback=refuse_empty,
        help="The site the run is at: its \\[tco] site_prices entry prices it and its time zone bills the demand "
             "charge, as in the daily accounts (default: the fleet's price source)."),
    start: Start = None,
    data_dir: DataDir = None,
    demand_charge_usd_per_kw_month: Optional[float] = typer.Option(
        None, help="Demand charge, USD per peak kW per month (default: settings, 15)."),
    gpu_capex_usd: Optional[float] = typer.Option(None, help="Price of one GPU, USD (default: settings, 30000)."),
    server_capex_usd: Optional[float] = typer.Option(None, help="Price of one server without GPUs, USD (default: settings, 60000)."),
    gpus_per_server: GpusPerServer = None,
    lifetime_years: LifetimeYears = None,
    operations_ratio: Optional[float] = typer.Option(None, help="Operations per year as a share of capital (default: settings, 0.1)."),
) -> dict:
    """Estimate a run's cost: energy at the meter x price + demand charge + capital + operations.

    Example: joulehouse tco estimate --gpu-model H100-SXM --gpus 8 --days 30
    """
    from joulehouse.reports.accounts.estimate import estimate_cost
    from joulehouse.reports.accounts.prices import DEFAULT_PRICE_FILE, PriceFileError, load_pjm_lmp_csv
    from joulehouse.reports.accounts.settings import (CapexUsd, DemandCharge, LifetimeYears as Lifetime, PricePerMwh,
                                                      Uplift, parse_site_prices, site_price_settings)

    price_usd_per_mwh = within("--price-usd-per-mwh", price_usd_per_mwh, PricePerMwh)
    demand_charge_usd_per_kw_month = within("--demand-charge-usd-per-kw-month", demand_charge_usd_per_kw_month,
                                            DemandCharge)
    gpu_capex_usd = within("--gpu-capex-usd", gpu_capex_usd, CapexUsd)
    server_capex_usd = within("--server-capex-usd", server_capex_usd, CapexUsd)
    lifetime_years = within("--lifetime-years", lifetime_years, Lifetime)
    operations_ratio = within("--operations-ratio", operations_ratio, Uplift)

    # the site's source as the daily accounts resolve it: its site_prices entry, else the fleet's
    # (the estimate had no site, so a site on its own 150 USD/MWh was priced at the fleet's 50); a
    # flat entry reads no price file, so no reference folder either
    entry = parse_site_prices(tco.site_prices).get(site) if site is not None else None
    tco, reference_dir = site_price_settings(tco, site, data_dir or DEFAULT_DATA_DIR) if site is not None \
        else (tco, data_dir or DEFAULT_DATA_DIR)
    node = tco.price_node if price_node is None else price_node  # "" is a node the file lacks, not the default
    started = parse_start(start) if start is not None else None  # a bad date before any file is opened
    if price_usd_per_mwh is not None and (price_file is not None or start is not None):
        fail("give either --price-usd-per-mwh or --start (with an optional --price-file), not both")
    if start is None and (price_file is not None or price_node is not None):
        # they price the run's own hours: without --start they were dropped without a word
        fail("--price-file and --price-node price the run's hours: give --start too")
    own_flat = entry is not None and entry.kind == "flat"
    if own_flat and price_file is None and (price_node is not None or data_dir is not None):
        fail(f"--price-node and --data-dir choose a market price file; site {quoted(site)} is priced by its [tco] "
             f"site_prices entry at a flat {entry.flat_price_usd_per_mwh:g} USD/MWh: give --price-file (with --start) "
             "to price by a market file instead")
    # the flag, else the site's [tco] price_file (what the daily accounts price with), else the
    # reference file under --data-dir; none for a site on its own flat price
    market_file = price_file or (Path(tco.price_file) if tco.price_file and data_dir is None
                                 else reference_dir / DEFAULT_PRICE_FILE if reference_dir is not None else None)
    if price_usd_per_mwh is not None:
        price, source = price_usd_per_mwh, f"flat {price_usd_per_mwh:g} USD/MWh"
    elif price_file is None and tco.tariff_file:
        # the site's tariff first, as the daily accounts price: it was never consulted here
        if price_node is not None or data_dir is not None:  # options that would price nothing, said
            fail("--price-node and --data-dir choose a market price file; the site's [tco] tariff_file prices this "
                 "run: give --price-file (with --start) to price by a market file instead")
        price, source = _tariff_mean(tco, run.hours, started, fail)
    elif start is not None and market_file is not None:
        if run.hours is None:
            fail("--start needs --hours or --days (the run's wall-clock time)")
        path = market_file
        try:
            lmp = load_pjm_lmp_csv(path, node)
        except PriceFileError as exc:
            fail(f"{exc} (give --price-file, --data-dir, or [tco] price_file in --config)")
        price, counts = run_hourly_mean(lmp, "price_usd_per_mwh", started, run.hours, f"{path.name} node {node}")
        source = f"hourly mean {price:.2f} USD/MWh of {path.name} node {node}, year-mapped"
        extra["price_rule_counts"] = counts
    else:
        price = tco.flat_price_usd_per_mwh
        source = f"flat {price:g} USD/MWh" + ("" if own_flat else ", [tco] flat_price_usd_per_mwh")
    if site is not None and price_usd_per_mwh is None:
        # a site no entry names is echoed cut short: a 100 kB --site came back whole in the JSON
        source += (f"; site {quoted(site)}: its [tco] site_prices entry ({entry.kind}, {entry.timezone})"
                   if entry is not None else f"; site {quoted(site)} has no [tco] site_prices entry: the fleet's price source")

    def given(value, default):
        return default if value is None else value

    try:
        result = estimate_cost(run, price, given(demand_charge_usd_per_kw_month, tco.demand_charge_usd_per_kw_month),
                               given(gpu_capex_usd, tco.gpu_capex_usd), given(server_capex_usd, tco.server_capex_usd),
                               given(gpus_per_server, tco.gpus_per_server), given(lifetime_years, tco.lifetime_years),
                               given(operations_ratio, tco.operations_ratio_of_capex_per_year), source,
                               start=started, timezone=tco.tariff_timezone)
    except ValueError as exc:
        fail(str(exc))
    return result


def register(app: typer.Typer) -> None:
    """Add `tco` (with `estimate`) to the main app."""
    app.add_typer(tco_app, name="tco")


def _tariff_mean(tco, hours: float | None, started, fail) -> tuple[float, str]:
    """The [tco] tariff's price (USD/MWh) over the run's hours, each weighed by the part of it the
    run spends there; from nominal_start without --start (a tariff's price depends on the hour)."""
    from joulehouse.reports.accounts.estimate import nominal_start, overlap_mean, run_hour_overlaps
    from joulehouse.reports.accounts.prices import PriceFileError, load_urdb_tariff, tariff_prices

    if hours is None:
        fail("[tco] tariff_file prices each hour of the run: give --hours or --days (and --start), "
             "or --price-usd-per-mwh")
    try:
        tariff = load_urdb_tariff(Path(tco.tariff_file), tco.tariff_tier)
    except PriceFileError as exc:
        fail(str(exc))
    placed_at = started or nominal_start(tco.tariff_timezone)
    overlaps = run_hour_overlaps(placed_at, hours)
    mean = overlap_mean(tariff_prices(tariff, overlaps["hour_at"], tco.tariff_timezone), "price_usd_per_kwh",
                        overlaps) * 1000.0
    placed = "" if started else f", placed from {placed_at:%Y-%m-%d %H:%M} UTC (give --start)"
    return mean, f"hourly mean {mean:.2f} USD/MWh of the [tco] tariff {Path(tco.tariff_file).name}{placed}"
