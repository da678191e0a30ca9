"""Cost per TFLOPS-hour of FP16-equivalent work per GPU model (rpt_compute_cost_daily), from the
day's cost accounts (rpt_tco_daily) and the FLOPs per watt step (fct_flops_per_watt_daily)."""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.reports.accounts.warehouse_io import load_sql
from joulehouse.warehouse.sqlio import relation_exists, replace_day

NEEDS = ("rpt_tco_daily", "fct_job_efficiency", "fct_flops_per_watt_daily")


def compute_cost_day(con: duckdb.DuckDBPyConnection, day: dt.date) -> int | None:
    """Replace `day`'s rows of rpt_compute_cost_daily; their count, or None when an input is missing
    (no jobs reporting FLOPs, no cost accounts): nothing to divide."""
    if not all(relation_exists(con, name) for name in NEEDS):
        return None
    return replace_day(con, "rpt_compute_cost_daily", day, load_sql("rpt_compute_cost_daily"), {"day": day})
