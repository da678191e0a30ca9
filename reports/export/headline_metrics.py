"""The day's headline as Prometheus metrics: a textfile for node_exporter's textfile collector on
the analytics host, so the fleet's dashboards show what the daily run found beside the nodes'
own metrics.

Gauges of the newest day written (a backfill of an older day leaves the file alone, as the
export leaves the newer config in place): `joulehouse_daily_day_timestamp_seconds` (the day's
UTC midnight) says which day they are. A figure the day does not have (no accounts, no checks
run) is left out, not written as 0. The file is replaced atomically (prometheus_client's
write_to_textfile).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

from joulehouse.warehouse.sqlio import SqlFiles, relation_exists

HEADLINE_SQL = SqlFiles("joulehouse.reports.export", "sql")
# metric -> (help, SQL file, its column, the relations the file reads)
HEADLINE = {
    "joulehouse_daily_gpu_energy_kwh": ("GPU board energy of the day, kWh.", "headline_gpu_energy", "gpu_energy_kwh",
                                        ("fct_gpu_energy_hourly",)),
    "joulehouse_daily_gpu_coverage_ratio": ("Mean share of the day each GPU was observed, 0..1.",
                                            "headline_coverage", "coverage_ratio", ("fct_gpu_coverage_daily",)),
    "joulehouse_daily_gpus": ("GPUs with any reading that day.", "headline_coverage", "gpus",
                              ("fct_gpu_coverage_daily",)),
    "joulehouse_daily_it_energy_kwh": ("IT energy accounted (BMC where usable, else GPU), kWh.", "headline_carbon",
                                       "it_energy_kwh", ("rpt_carbon_daily",)),
    "joulehouse_daily_facility_energy_kwh": ("Facility energy, IT x PUE (measured, else the default), kWh.", "headline_carbon",
                                             "facility_energy_kwh", ("rpt_carbon_daily",)),
    "joulehouse_daily_carbon_gco2e": ("Carbon, location-based (operational + embodied), gCO2e.", "headline_carbon",
                                      "total_gco2e", ("rpt_carbon_daily",)),
    "joulehouse_daily_carbon_market_gco2e": ("Carbon, market-based (operational + embodied), gCO2e.", "headline_carbon",
                                             "total_market_gco2e", ("rpt_carbon_daily",)),
    "joulehouse_daily_cost_usd": ("Cost of the day, every component of rpt_tco_daily.total_cost_usd (energy, demand, green "
                                  "premium, density surcharge, capital, operations), USD.",
                                  "headline_cost", "total_cost_usd", ("rpt_tco_daily",)),
    "joulehouse_daily_energy_cost_usd": ("Energy cost of the day at hourly prices, USD.", "headline_cost",
                                         "energy_cost_usd", ("rpt_tco_daily",)),
    **{f"joulehouse_daily_{name}": (help_text, "headline_checks", column, ("fct_check_results",))
       for name, column, help_text in (
           ("checks", "checks", "Data checks run on the day (each checker's latest run)."),
           ("blocking_checks_failed", "blocking_failed", "Blocking data checks that failed (the gate's latest run)."),
           ("warning_checks_failed", "warning_failed", "Warning data checks that failed; the run went on (GX's latest run)."))},
}
EXTRA = {
    "joulehouse_daily_recommendations_exported": "GPU settings in the day's signed recommended config.",
    "joulehouse_daily_day_timestamp_seconds": "The day these figures are of: its UTC midnight (Unix time).",
    "joulehouse_daily_written_timestamp_seconds": "When the daily run wrote these figures (Unix time).",
}
METRIC_NAMES = frozenset(HEADLINE) | frozenset(EXTRA)
_DAY_LINE = re.compile(r"^joulehouse_daily_day_timestamp_seconds (\S+)$", re.M)


def day_headline(con, day: dt.date) -> dict[str, float]:
    """The day's figures by metric name; those the warehouse cannot give are left out."""
    rows: dict[str, dict[str, Any]] = {}
    values = {}
    for name, (_, sql, column, relations) in HEADLINE.items():
        if not all(relation_exists(con, r) for r in relations):
            continue
        if sql not in rows:
            rows[sql] = HEADLINE_SQL.records(con, sql, {"day": day})[0]
        if rows[sql][column] is not None:
            values[name] = float(rows[sql][column])
    return values


def exported_settings(config_path: str | Path) -> int | None:
    """GPU settings in a signed recommended-config file (None when there is none)."""
    try:
        hosts = json.loads(Path(config_path).read_bytes())["body"]["hosts"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return sum(len(gpus) for gpus in hosts.values())


def write_headline_metrics(con, day: dt.date, path: str | Path, *, export_path: str | Path | None,
                           now: dt.datetime | None = None) -> Path | None:
    """Write the day's headline to `path`; returns it, or None when the file holds a later day."""
    path = Path(path)
    midnight = dt.datetime.combine(day, dt.time(), dt.timezone.utc).timestamp()
    try:
        written = _DAY_LINE.search(path.read_text(encoding="utf-8"))
        if written and float(written.group(1)) > midnight:
            return None
    except (OSError, ValueError):
        pass
    values = day_headline(con, day)
    exported = exported_settings(export_path) if export_path else None
    if exported is not None:
        values["joulehouse_daily_recommendations_exported"] = float(exported)
    values["joulehouse_daily_day_timestamp_seconds"] = midnight
    values["joulehouse_daily_written_timestamp_seconds"] = (now or dt.datetime.now(dt.timezone.utc)).timestamp()
    registry = CollectorRegistry()
    helps = {name: spec[0] for name, spec in HEADLINE.items()} | EXTRA
    for name, value in values.items():
        Gauge(name, helps[name], registry=registry).set(value)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry)
    return path
