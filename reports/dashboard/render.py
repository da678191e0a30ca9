"""The carbon dashboard: one HTML page over every day the warehouse holds.

Carbon and cost by team, GPU model and site, per week and per month (location- and market-based
scope 2, embodied apart, and the total cost), energy per unit of work over time with the fleet's
FP16-equivalent FLOPs per watt against its +20% goal, and the applied settings' realised savings
over time beside their predictions. The daily DAG rebuilds it after each day's report
(`<reports>/dashboard.html`, linked from each daily report); like the reports it loads the one
copy of plotly.js beside them (4.6 MB, not a copy per page) and opens offline. Its numbers are
sums of the warehouse's relations (reports/dashboard/sql).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import plotly.graph_objects as go
import polars as pl

from joulehouse.collectors.writer import write_bytes_atomic
from joulehouse.reports.page.blocks import FigureWriter, Section, card, cards, fmt_usd, page, shared_plotly, table
from joulehouse.reports.page.figures import LAYOUT
from joulehouse.reports.page.section_summary import carbon_total_cards
from joulehouse.warehouse.sqlio import SqlFiles, relation_exists

SQL = SqlFiles("joulehouse.reports.dashboard", "sql")
DASHBOARD_NAME = "dashboard.html"
# Empty, typed stand-ins for the optional relations, so a warehouse without costs or jobs still draws.
STAND_INS = {
    "rpt_tco_daily": "SELECT CAST(NULL AS DATE) AS day, '' AS job_id, CAST(NULL AS DOUBLE) AS total_cost_usd WHERE false",
    "fct_job_efficiency": ("SELECT CAST(NULL AS DATE) AS day, '' AS job_id, '' AS gpu_uuid, '' AS gpu_model, "
                           "CAST(NULL AS DOUBLE) AS energy_kwh, CAST(NULL AS BIGINT) AS tokens_total, "
                           "CAST(NULL AS BIGINT) AS requests_total, CAST(NULL AS BIGINT) AS samples_total WHERE false"),
    "dim_gpu": "SELECT '' AS gpu_uuid, '' AS site WHERE false",
    "fct_gpu_energy_hourly": ("SELECT CAST(NULL AS DATE) AS day, '' AS gpu_uuid, '' AS gpu_model, "
                              "CAST(NULL AS DOUBLE) AS energy_kwh WHERE false"),
    "fct_flops_per_watt_daily": ("SELECT CAST(NULL AS DATE) AS day, '' AS gpu_model, CAST(NULL AS DOUBLE) AS "
                                 "fp16_equivalent_flops_per_w, CAST(NULL AS DOUBLE) AS goal_flops_per_w WHERE false"),
    "fct_recommendation_outcome": (
        "SELECT CAST(NULL AS DATE) AS day, '' AS scope, '' AS gpu_model, CAST(NULL AS DOUBLE) AS power_limit_w_before, "
        "CAST(NULL AS DOUBLE) AS power_limit_w_after, CAST(NULL AS DOUBLE) AS realised_saving_pct, "
        "CAST(NULL AS DOUBLE) AS saving_ci_low_pct, CAST(NULL AS DOUBLE) AS saving_ci_high_pct, "
        "CAST(NULL AS DOUBLE) AS predicted_saving_pct, CAST(NULL AS BIGINT) AS n_treated_gpus WHERE false"),
}
# The accounts' own split by GPU model and site; absent in a warehouse accounted before they were
# kept, when every day falls back to the approximation (dashboard_carbon_cost.sql says how).
SPLIT_STAND_INS = {
    "rpt_carbon_by_gpu_daily": ("SELECT CAST(NULL AS DATE) AS day, '' AS job_id, '' AS gpu_model, '' AS site, "
                                "CAST(NULL AS DOUBLE) AS energy_kwh, CAST(NULL AS DOUBLE) AS location_gco2e, "
                                "CAST(NULL AS DOUBLE) AS market_gco2e, CAST(NULL AS DOUBLE) AS embodied_gco2e WHERE false"),
    "rpt_tco_by_gpu_daily": ("SELECT CAST(NULL AS DATE) AS day, '' AS job_id, '' AS gpu_model, '' AS site, "
                             "CAST(NULL AS DOUBLE) AS energy_kwh, CAST(NULL AS DOUBLE) AS total_cost_usd WHERE false"),
}
# The figures' metrics: operational (scope 2) and embodied carbon apart, each named so; the cards'
# totals (operational + embodied) carry the daily report's labels (reports.page.section_summary).
METRICS = (("location_gco2e", "operational carbon, location-based (kgCO2e)", 1e-3),
           ("market_gco2e", "operational carbon, market-based (kgCO2e)", 1e-3),
           ("embodied_gco2e", "embodied carbon (kgCO2e)", 1e-3), ("total_cost_usd", "total cost (USD)", 1.0))
DIMENSIONS = (("team", "team"), ("gpu_model", "GPU model"), ("site", "site"))


def _stand_ins(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create the stand-ins of the absent relations; the names of the absent STAND_INS (whose part
    of the page is empty; an absent split only makes its days approximate, see split_fallback_note)."""
    missing = [name for name in STAND_INS if not relation_exists(con, name)]
    for name in [*missing, *(n for n in SPLIT_STAND_INS if not relation_exists(con, n))]:
        con.execute(f"CREATE OR REPLACE TEMP VIEW {name} AS {STAND_INS.get(name) or SPLIT_STAND_INS[name]}")
    return missing


def split_fallback_note(con: duckdb.DuckDBPyConnection) -> str | None:
    """A sentence naming the days whose split by GPU model and site is approximate; None if none."""
    days, first, last = con.execute(SQL.text("dashboard_split_fallback_days")).fetchall()[0]
    if not days:
        return None
    return (f"{days} day(s) from {first} to {last} were accounted before the accounts kept their amounts per GPU "
            "model and site (rpt_carbon_by_gpu_daily, rpt_tco_by_gpu_daily): on those days carbon and cost are split "
            "over GPU models and sites by GPU board energy, an approximation that moves servers' BMC overhead onto "
            "GPUs counted at board energy; re-run the carbon and cost step of those days to make them exact. The "
            "teams' totals are exact either way.")


def by_dimension_figure(rows: pl.DataFrame, dimension: str, label: str, period: str) -> go.Figure:
    """Stacked bars per period and value of `dimension`; buttons switch between the four metrics."""
    part = rows.filter(pl.col("dimension") == dimension).sort("period_start", "value")
    values = part["value"].unique(maintain_order=True).to_list()
    fig = go.Figure()
    for m, (column, title, scale) in enumerate(METRICS):
        for value in values:
            own = part.filter(pl.col("value") == value)
            fig.add_trace(go.Bar(x=own["period_start"].to_list(), y=[v * scale if v is not None else None
                                                                     for v in own[column].to_list()],
                                 name=str(value), visible=m == 0, legendgroup=str(value), showlegend=True))
    buttons = []
    for m, (_, title, _) in enumerate(METRICS):
        visible = [i // max(len(values), 1) == m for i in range(len(METRICS) * len(values))]
        buttons.append(dict(label=title, method="update", args=[{"visible": visible}, {"yaxis": {"title": {"text": title}}}]))
    fig.update_layout(barmode="stack", title=f"Carbon and cost by {label}, per {period}",
                      xaxis_title=f"{period} starting (UTC)", yaxis_title=METRICS[0][1],
                      updatemenus=[dict(buttons=buttons, direction="down", x=1.0, xanchor="right", y=1.18)], **LAYOUT)
    return fig


def efficiency_figure(rows: pl.DataFrame) -> go.Figure:
    fig = go.Figure()
    for column, unit in (("j_per_token", "J/token"), ("j_per_sample", "J/sample"), ("j_per_request", "J/request")):
        for model in rows["gpu_model"].unique(maintain_order=True).to_list():
            own = rows.filter((pl.col("gpu_model") == model) & pl.col(column).is_not_null())
            if own.height:
                fig.add_trace(go.Scatter(x=own["day"].to_list(), y=own[column].to_list(), mode="lines+markers",
                                         name=f"{model}: {unit}"))
    fig.update_layout(title="Energy per unit of work over time", xaxis_title="day (UTC)",
                      yaxis_title="energy per unit (J/unit, log)", yaxis_type="log", **LAYOUT)
    return fig


def flops_figure(rows: pl.DataFrame) -> go.Figure:
    fig = go.Figure()
    fleet = rows.filter((pl.col("gpu_model") == "fleet") & pl.col("fp16_equivalent_flops_per_w").is_not_null()).sort("day")
    fig.add_trace(go.Scatter(x=fleet["day"].to_list(), y=(fleet["fp16_equivalent_flops_per_w"] / 1e9).to_list(),
                             mode="lines+markers", name="fleet, sustained FP16-equivalent"))
    fig.add_trace(go.Scatter(x=fleet["day"].to_list(), y=(fleet["goal_flops_per_w"] / 1e9).to_list(), mode="lines",
                             line=dict(dash="dash"), name="goal: +20% on the first day"))
    fig.update_layout(title="Fleet FLOPs per watt against the 20% gain goal", xaxis_title="day (UTC)",
                      yaxis_title="GFLOP/s per W", **LAYOUT)
    return fig


def savings_figure(rows: pl.DataFrame) -> go.Figure:
    fig = go.Figure()
    for label in rows["label"].unique(maintain_order=True).to_list():
        own = rows.filter(pl.col("label") == label)
        above = (own["saving_ci_high_pct"] - own["realised_saving_pct"]).to_list()
        below = (own["realised_saving_pct"] - own["saving_ci_low_pct"]).to_list()
        fig.add_trace(go.Scatter(x=own["day"].to_list(), y=own["realised_saving_pct"].to_list(), mode="markers+lines",
                                 name=f"{label}: realised", error_y=dict(type="data", array=above, arrayminus=below)))
        fig.add_trace(go.Scatter(x=own["day"].to_list(), y=own["predicted_saving_pct"].to_list(), mode="markers",
                                 marker=dict(symbol="x"), name=f"{label}: predicted"))
    fig.update_layout(title="Realised savings of the applied settings over time", xaxis_title="day (UTC)",
                      yaxis_title="energy per unit of work saved (%)", **LAYOUT)
    return fig


def _plus(operational: float | None, embodied: float | None) -> float | None:
    """Operational carbon plus the embodied part where that is known (the cards then break it down)."""
    return None if operational is None else operational + (embodied or 0.0)


def render_dashboard(con: duckdb.DuckDBPyConnection, out_path: Path) -> Path:
    """Write the dashboard over every day the warehouse holds to `out_path` (atomically); its path.
    Raises ValueError when the warehouse has no carbon accounts at all."""
    if not relation_exists(con, "rpt_carbon_daily"):
        raise ValueError("no carbon accounts (rpt_carbon_daily): run the carbon and cost step of a day first")
    missing = _stand_ins(con)
    figs = FigureWriter()
    periods = {p: con.sql(SQL.text("dashboard_carbon_cost"), params={"period": p}).pl() for p in ("week", "month")}
    # fetchall, not fetchone: an unfinished result blocks the next query on this connection
    days = con.execute("SELECT min(day), max(day), count(DISTINCT day) FROM rpt_carbon_daily").fetchall()[0]
    # a period without a figure (NULL) leaves the total unknown: polars' sum read it as 0 (a total
    # cost of 0.00 USD with no cost accounts; embodied 0.0 kgCO2e where none was known)
    totals = periods["month"].filter(pl.col("dimension") == "team").select(
        [pl.when(pl.col(c).null_count() == 0).then(pl.col(c).sum()).alias(c) for c, _, _ in METRICS]).to_dicts()[0]
    cost_days = con.execute(SQL.text("dashboard_cost_missing_days")).fetchall()[0][0]
    overview = Section("overview", "All days")
    # The same totals, labels and rounding as the daily report's cards: operational + embodied.
    embodied = totals["embodied_gco2e"]
    market_days = con.execute(SQL.text("dashboard_market_missing_days")).fetchall()[0][0]
    market_sub = (f"{market_days} day(s) without a market-based figure (no residual mix or contract): not computed"
                  if market_days else "after energy contracts (PPA/REC), then the residual mix")
    overview.add(cards([
        *carbon_total_cards(_plus(totals["location_gco2e"], embodied),
                            None if market_days else _plus(totals["market_gco2e"], embodied), embodied, "", market_sub),
        card("total cost", fmt_usd(totals["total_cost_usd"]) if totals["total_cost_usd"] is not None else "-",
             f"{cost_days} day(s) without cost accounts: not computed" if cost_days else "every component (TCO)"),
        card("days held", str(days[2]), f"{days[0]} to {days[1]}")]))
    overview.note("Carbon is operational (scope 2, both ways: location-based, the grid's hourly intensity where the "
                  "energy was drawn, and market-based, after contracts) plus embodied (manufacturing, amortised over "
                  "the GPUs' calendar time in the fleet): the cards' totals are both, as on the daily reports; the "
                  "figures and tables keep them apart. "
                  "A job's carbon and cost by GPU model and site are the accounts' own, GPU-hour by GPU-hour, "
                  "and so are those of what no job held (team 'unallocated'). The tables' "
                  "it_energy_kwh is IT energy, as the carbon accounts count it: the servers' BMC energy split by "
                  "GPU share where usable, else the GPU boards' energy.")
    if cost_days:
        overview.note(f"The weeks and months holding the {cost_days} day(s) without cost accounts show no cost "
                      "(cost_missing_days counts them): the other days' sum would read as the whole period's.")
    if market_days:
        overview.note(f"The weeks and months holding the {market_days} day(s) without a market-based figure show no "
                      "market-based carbon (a gap in the figures, empty in the tables, market_missing_days counts "
                      "them): the other days' sum would read as the whole period's.")
    for name in missing:
        overview.missing(f"{name} is not in the warehouse: its part of the dashboard is empty")
    if (fallback := split_fallback_note(con)) is not None:
        overview.warn(fallback, "Approximate split by GPU model and site.")
    sections = [overview]
    for dimension, label in DIMENSIONS:
        s = Section(f"by-{dimension}", f"By {label}")
        for period, rows in periods.items():
            s.add(figs.div(by_dimension_figure(rows, dimension, label, period)))
        month = periods["month"].filter(pl.col("dimension") == dimension).drop("dimension")
        s.add(table(month.with_columns([(pl.col(c) * 1e-3).alias(c.replace("_gco2e", "_kgco2e"))
                                        for c in ("location_gco2e", "market_gco2e", "embodied_gco2e")])
                    .drop("location_gco2e", "market_gco2e", "embodied_gco2e"),
                    digits={"location_kgco2e": 2, "market_kgco2e": 2, "embodied_kgco2e": 2, "total_cost_usd": 2},
                    max_rows=40))
        sections.append(s)
    work = con.sql(SQL.text("dashboard_work_efficiency")).pl()
    s = Section("work", "Energy per unit of work")
    if work.height:
        s.add(figs.div(efficiency_figure(work)))
        if work.filter(pl.col("gpu_model") == "fleet")["fp16_equivalent_flops_per_w"].drop_nulls().len():
            s.add(figs.div(flops_figure(work)))
    else:
        s.missing("no job reports work done: energy per unit of work not drawn")
    sections.append(s)
    savings = con.sql(SQL.text("dashboard_realised_savings")).pl()
    s = Section("savings", "Realised savings")
    if savings.height:
        s.add(figs.div(savings_figure(savings)))
    else:
        s.missing("no setting has taken effect and been measured yet (fct_recommendation_outcome)")
    sections.append(s)
    out_path = Path(out_path)
    text = page("joulehouse carbon dashboard", f"every day the warehouse holds: {days[0]} to {days[1]} (UTC)",
                sections, plotly_src=shared_plotly(out_path.parent))
    write_bytes_atomic(out_path, text.encode("utf-8"))
    return out_path
