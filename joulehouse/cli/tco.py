"""`joulehouse tco estimate`: the cost of a past or planned run, without telemetry.

Prints JSON: energy_kwh (at the meter), energy_cost_usd, demand_charge_usd, capital_usd,
operations_usd, total_cost_usd, cost_per_gpu_hour_usd, method. Exit code 2 on bad input.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.options import fail
from joulehouse.cli.run_options import (DEFAULT_DATA_DIR, AvgPowerW, DataDir, GpuHours, Gpus, GpusPerServer, Hours,
                                         LifetimeYears, Pue, Start, Utilization, parse_start, run_shape)

tco_app = typer.Typer(no_args_is_help=True, help="Total cost of ownership.")


@tco_app.command("estimate")
def estimate(
    gpus: Gpus = None,
    hours: Hours = None,
    gpu_hours: GpuHours = None,
    avg_power_w: AvgPowerW = ...,
    pue: Pue = 1.3,
    price_usd_per_mwh: Optional[float] = typer.Option(None, help="Flat energy price, $/MWh."),
    price_file: Optional[Path] = typer.Option(None, help="PJM hourly LMP file (with --start), $/MWh."),
    price_node: str = typer.Option("PJM-RTO", help="Pricing node in the price file."),
    start: Start = None,
    data_dir: DataDir = DEFAULT_DATA_DIR,
    demand_charge_usd_per_kw_month: float = typer.Option(15.0, help="Demand charge, $ per peak kW per month."),
    gpu_capex_usd: float = typer.Option(30000.0, help="Price of one GPU, $."),
    server_capex_usd: float = typer.Option(60000.0, help="Price of one server without GPUs, $."),
    gpus_per_server: GpusPerServer = 8,
    lifetime_years: LifetimeYears = 5.0,
    operations_ratio: float = typer.Option(0.1, help="Operations per year as a share of capital."),
    utilization: Utilization = 1.0,
) -> None:
    """Estimate a run's cost: energy at the meter x price + demand charge + capital + operations."""
    from joulehouse.reports.accounts.estimate import estimate_cost, hourly_mean
    from joulehouse.reports.accounts.prices import DEFAULT_PRICE_FILE, PriceFileError, load_pjm_lmp_csv

    run = run_shape(gpus, hours, gpu_hours, avg_power_w, pue, utilization)
    extra: dict = {}
    if price_usd_per_mwh is not None and (price_file is not None or start is not None):
        fail("give either --price-usd-per-mwh or --start (with an optional --price-file), not both")
    if price_usd_per_mwh is not None:
        price, source = price_usd_per_mwh, f"flat {price_usd_per_mwh} $/MWh"
    elif start is not None:
        if run.hours is None:
            fail("--start needs --hours (the run's wall-clock hours)")
        path = price_file or data_dir / DEFAULT_PRICE_FILE
        try:
            lmp = load_pjm_lmp_csv(path, price_node)
        except PriceFileError as exc:
            fail(str(exc))
        price, counts = hourly_mean(lmp, "price_usd_per_mwh", parse_start(start), run.hours, 0.0)
        source = f"hourly mean {price:.2f} $/MWh of {path.name} node {price_node}, year-mapped"
        extra["price_rule_counts"] = counts
    else:
        fail("give --price-usd-per-mwh P, or --start T (hourly prices from --price-file)")
    try:
        result = estimate_cost(run, price, demand_charge_usd_per_kw_month, gpu_capex_usd, server_capex_usd,
                               gpus_per_server, lifetime_years, operations_ratio, source)
    except ValueError as exc:
        fail(str(exc))
    typer.echo(json.dumps(result | extra, indent=2, default=str))


def register(app: typer.Typer) -> None:
    """Add `tco` (with `estimate`) to the main app."""
    app.add_typer(tco_app, name="tco")
