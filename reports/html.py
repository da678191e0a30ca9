"""The daily HTML report: one self-contained file a person opens offline in a browser.

`render_report(con, day, out_path)` reads whichever warehouse relations exist for `day` and
writes: a summary (fleet energy kWh, carbon kgCO2e, cost USD, what to do), then energy, power
models, carbon and cost, data quality and recommendations. Each relation that is missing, or
has no rows for the day, gets a plain sentence saying what was not computed and why.

`notes` (optional) adds context the warehouse does not hold: string values are listed under the
summary; "energy_vs_limit" (rows of gpu_model, power_limit_w, energy_kwh) draws the
energy-vs-limit curve; "hourly_context" (rows of hour_at, intensity_gco2e_per_kwh,
price_usd_per_mwh) stands in for the relation rpt_context_hourly. With several sites the
context curves show the mean over sites per hour; the load is the fleet's IT energy per hour
(rpt_context_hourly.fleet_it_energy_kwh, kWh in an hour = mean kW) where the relation has it,
else the GPUs' board power.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from pathlib import Path
from typing import Any

import polars as pl
from plotly.offline import get_plotlyjs

from reports import figures
from reports.report_page import FigureWriter, Section, card, esc, fmt_number, page, table
from reports.warehouse_tables import count_day_by, read_day

MAX_SCATTER_POINTS = 5000


def _frame(value: Any) -> pl.DataFrame | None:
    if value is None:
        return None
    return value if isinstance(value, pl.DataFrame) else pl.DataFrame(value)


def _usable(frame: pl.DataFrame | None, why: str | None, name: str, day: dt.date) -> tuple[pl.DataFrame | None, str]:
    """The frame if it has rows, else None and the reason (missing relation or empty day)."""
    if frame is None:
        return None, why or f"relation {name} does not exist"
    if frame.height == 0:
        return None, f"{name} has no rows for {day}"
    return frame, ""


def _has(frame: pl.DataFrame, *cols: str) -> bool:
    return all(c in frame.columns and frame[c].null_count() < frame.height for c in cols)


class ReportData:
    """The day's relations, read once."""

    def __init__(self, con, day: dt.date, notes: dict[str, Any]):
        self.day = day
        read = lambda name: _usable(*read_day(con, name, day), name, day)  # noqa: E731
        self.energy, self.energy_why = read("fct_gpu_energy_hourly")
        self.models, self.models_why = read("fct_power_model")
        self.residual, self.residual_why = read("fct_power_residual_hourly")
        self.thermal, self.thermal_why = read("fct_thermal_gpu")
        self.carbon, self.carbon_why = read("rpt_carbon_daily")
        self.tco, self.tco_why = read("rpt_tco_daily")
        self.checks, self.checks_why = read("fct_check_results")
        self.recs, self.recs_why = read("fct_recommendation")
        self.reconciliation, self.reconciliation_why = read("fct_node_reconciliation_hourly")
        self.coverage, self.coverage_why = read("fct_gpu_coverage_daily")
        self.quarantine, self.quarantine_why = _usable(*count_day_by(con, "quarantine_gpu_samples", day, "reason"),
                                                       "quarantine_gpu_samples", day)
        context = _frame(notes.get("hourly_context"))
        self.context, self.context_why = (context, "") if context is not None else read("rpt_context_hourly")
        self.shift, self.shift_why = read("rpt_shift_opportunity_daily")
        self.curve = _frame(notes.get("energy_vs_limit"))
        if self.curve is None:
            curve, _ = read("fct_energy_vs_limit")
            if _has(curve, "is_dominant_bottleneck"):
                # One curve per GPU model: the bottleneck its fleet mostly runs.
                self.curve = curve.filter(pl.col("is_dominant_bottleneck"))

    def fleet_load(self) -> tuple[pl.DataFrame, str]:
        """(hour_at, power_kw) and its label: the IT load from the context where known, else GPU power."""
        if _has(self.context, "hour_at", "fleet_it_energy_kwh"):
            return (self.context.group_by("hour_at").agg(pl.col("fleet_it_energy_kwh").sum().alias("power_kw"))
                    .sort("hour_at"), "fleet IT power")
        return (self.energy.group_by("hour_at").agg((pl.col("avg_power_w").sum() / 1000).alias("power_kw"))
                .sort("hour_at"), "fleet GPU power")

    def hourly_context(self) -> pl.DataFrame:
        """One row per hour: the context's value columns averaged over sites."""
        values = [c for c in ("intensity_gco2e_per_kwh", "price_usd_per_mwh") if c in self.context.columns]
        return self.context.group_by("hour_at").agg([pl.col(c).mean() for c in values]).sort("hour_at")

    def saving(self) -> tuple[int, float | None, float | None]:
        """(GPUs to cap, expected saving kWh/day, as % of fleet energy) from the recommendations
        and each GPU's measured energy of the day."""
        recs = self.recs.filter(pl.col("power_limit_w") < pl.col("default_limit_w")) if _has(
            self.recs, "power_limit_w", "default_limit_w") else self.recs
        if self.models is not None and "passed_gate" in self.models.columns:
            # the export holds back models whose fit failed its gate: they save nothing today
            passed = self.models.filter(pl.col("passed_gate").fill_null(False))["gpu_model"].unique()
            recs = recs.filter(pl.col("gpu_model").is_in(passed.implode()))
        if self.energy is None or not _has(recs, "expected_saving_pct"):
            return recs.height, None, None
        per_gpu = self.energy.group_by("gpu_uuid").agg(pl.col("energy_kwh").sum())
        joined = recs.join(per_gpu, on="gpu_uuid", how="left")
        kwh = float((joined["energy_kwh"].fill_null(0) * joined["expected_saving_pct"].fill_null(0) / 100).sum())
        total = float(self.energy["energy_kwh"].sum())
        return recs.height, kwh, (100 * kwh / total if total else None)


def _sum(frame: pl.DataFrame | None, col: str) -> float | None:
    return float(frame[col].sum()) if frame is not None and col in frame.columns else None


def summary_section(data: ReportData, notes: dict[str, Any]) -> Section:
    s = Section("summary", "Summary")
    energy, carbon_g, cost = _sum(data.energy, "energy_kwh"), _sum(data.carbon, "total_gco2e"), _sum(data.tco, "total_cost_usd")
    n_gpus = data.energy["gpu_uuid"].n_unique() if data.energy is not None else 0
    s.add('<div class="cards">'
          + card("fleet GPU energy", f"{fmt_number(energy, 1)} kWh" if energy is not None else "-",
                 f"{n_gpus} GPUs, board energy" if energy is not None else data.energy_why)
          + card("carbon", f"{fmt_number(carbon_g / 1000, 1)} kgCO2e" if carbon_g is not None else "-",
                 "location-based + embodied" if carbon_g is not None else data.carbon_why)
          + card("cost", f"{fmt_number(cost, 0)} USD" if cost is not None else "-",
                 "energy, demand, capital, operations" if cost is not None else data.tco_why)
          + "</div>")
    if data.recs is not None:
        n, kwh, pct = data.saving()
        excluded = data.models.filter(~pl.col("passed_gate").fill_null(False))["gpu_model"].unique().to_list() if (
            data.models is not None and "passed_gate" in data.models.columns) else []
        what = (f"Cap {n} GPUs as recommended below: expected saving {fmt_number(kwh, 1)} kWh/day"
                f" ({fmt_number(pct, 1)}% of the fleet's GPU energy)." if kwh is not None
                else f"Cap {n} GPUs as recommended below.")
        if excluded:
            what += f" Held back (power model failed its gate): {', '.join(sorted(excluded))}."
        s.add(f'<p class="todo"><b>What to do:</b> {esc(what)}</p>')
    else:
        s.missing(f"no recommendations ({data.recs_why}): nothing to apply today")
    for key, value in sorted(notes.items()):
        if isinstance(value, str):
            s.note(f"{key}: {value}")
    return s


def energy_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("energy", "Energy")
    if data.energy is None:
        s.missing(f"no GPU energy ({data.energy_why}): energy figures not drawn")
    else:
        s.add(figs.div(figures.fleet_power_by_model(data.energy)))
        s.add(figs.div(figures.energy_by_host(data.energy)))
        s.add(figs.div(figures.energy_by_gpu(data.energy)))
    if data.energy is not None and "energy_source" in data.energy.columns:
        by_source = data.energy.group_by("energy_source").agg(pl.col("energy_kwh").sum()).sort("energy_source")
        s.note("Energy by method: " + "; ".join(f"{r['energy_source']} {fmt_number(r['energy_kwh'], 1)} kWh"
                                                 for r in by_source.iter_rows(named=True)))
    rec = data.reconciliation
    if rec is None or not _has(rec, "node_energy_kwh"):
        s.missing(f"no IPMI data ({data.reconciliation_why or 'no BMC readings for the day'}): node reconciliation not computed")
    else:
        per = rec.group_by("host").agg(pl.col("node_energy_kwh").sum(), pl.col("gpu_energy_kwh").sum()).sort("host")
        fig = figures.energy_by_host(pl.concat([
            per.select("host", pl.lit("server (BMC)").alias("gpu_model"), pl.col("node_energy_kwh").alias("energy_kwh")),
            per.select("host", pl.lit("GPUs").alias("gpu_model"), pl.col("gpu_energy_kwh").alias("energy_kwh")),
        ]))
        fig.update_layout(barmode="group", title_text="Server (BMC) energy vs its GPUs' energy")
        s.add(figs.div(fig))
    return s


def models_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("models", "Power models")
    if data.models is None:
        s.missing(f"no power-model fits ({data.models_why}): model quality unknown")
    else:
        cols = [c for c in ("gpu_model", "feature_set", "n_samples", "mape_pct", "r2", "passed_gate", "gate_reason")
                if c in data.models.columns]
        s.add(table(data.models.select(cols).sort("gpu_model"), digits={"r2": 3}))
    if data.residual is None:
        s.missing(f"no residuals ({data.residual_why}): predicted vs measured not drawn")
    else:
        points = data.residual.sample(MAX_SCATTER_POINTS, seed=0) if data.residual.height > MAX_SCATTER_POINTS else data.residual
        if _has(points, "measured_energy_kwh", "predicted_energy_kwh"):
            s.add(figs.div(figures.predicted_vs_measured(points)))
        if _has(points, "avg_temp_c", "residual_pct"):
            s.add(figs.div(figures.residual_by_temperature(points)))
    if data.curve is not None and data.curve.height:
        s.add(figs.div(figures.energy_vs_limit(data.curve)))
    else:
        s.missing("no power-limit sweep given: energy-vs-limit curve not drawn")
    thermal_col = next((c for c in (data.thermal.columns if data.thermal is not None else [])
                        if c.endswith("_c_per_w") or c.endswith("_temp_c")), None)
    if data.thermal is None or thermal_col is None:
        s.missing(f"no thermal fit ({data.thermal_why or 'fct_thermal_gpu has no *_c_per_w column'}): thermal ranking not drawn")
    else:
        unit = "°C/W" if thermal_col.endswith("_c_per_w") else "°C"
        s.add(figs.div(figures.thermal_ranking(data.thermal, thermal_col, unit)))
    return s


def carbon_cost_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("carbon-cost", "Carbon and cost")
    if data.carbon is None:
        s.missing(f"no carbon account ({data.carbon_why}): carbon by team and stage not computed")
    else:
        s.add(figs.div(figures.by_team_and_stage(data.carbon, "total_gco2e", 1e-3, "Carbon by team and stage",
                                                 "carbon (kgCO2e)")))
    if data.tco is None:
        s.missing(f"no cost account ({data.tco_why}): cost by team and stage not computed")
    else:
        s.add(figs.div(figures.by_team_and_stage(data.tco, "total_cost_usd", 1.0, "Cost by team and stage", "cost (USD)")))
    if data.energy is None or data.context is None:
        s.missing(f"no hourly grid context ({data.context_why or 'no GPU energy'}): intensity and price against load not drawn")
        return s
    load, load_label = data.fleet_load()
    context = data.hourly_context()
    for col, title, unit in (("intensity_gco2e_per_kwh", "Grid carbon intensity against fleet load", "grid intensity (gCO2e/kWh)"),
                             ("price_usd_per_mwh", "Electricity price against fleet load", "price (USD/MWh)")):
        if _has(context, "hour_at", col):
            s.add(figs.div(figures.context_against_load(load, context, col, title, unit, load_label)))
        else:
            s.missing(f"hourly context has no {col}: that figure not drawn")
    shift_block(data, figs, s)
    return s


SHIFT_TABLE_ROWS = 10


def shift_block(data: ReportData, figs: FigureWriter, s: Section) -> None:
    """What moving the deferrable jobs to the day's cleanest / cheapest hours would have saved."""
    s.add("<h3>Time-shifting the deferrable jobs</h3>")
    if data.shift is None:
        s.missing(f"no shifting estimate ({data.shift_why}): no deferrable jobs, or the accounts were not run")
        return
    shift = data.shift.with_columns([pl.col(c).dt.convert_time_zone("UTC") for c in ("best_carbon_hour_at", "best_cost_hour_at")
                                     if c in data.shift.columns and isinstance(data.shift.schema[c], pl.Datetime)
                                     and data.shift.schema[c].time_zone])
    carbon_kg, cost = _sum(shift, "carbon_saving_gco2e"), _sum(shift, "cost_saving_usd")
    s.note(f"{shift.height} deferrable jobs, {fmt_number(_sum(shift, 'energy_kwh'), 1)} kWh IT. Moved, same energy, to "
           f"the day's hours with the lowest PUE x grid intensity (or PUE x price), each hour taking at most the "
           f"fleet's idle GPU-hours in it: {fmt_number((carbon_kg or 0) / 1000, 2)} kgCO2e and "
           f"{fmt_number(cost, 2)} USD of energy would have been saved (two separate plans).")
    s.add(figs.div(figures.shift_saving_by_team(shift)))
    cols = [c for c in ("team", "job_id", "energy_kwh", "carbon_saving_gco2e", "best_carbon_hour_at", "cost_saving_usd",
                        "best_cost_hour_at") if c in shift.columns]
    top = shift.sort(["carbon_saving_gco2e", "job_id"], descending=[True, False], nulls_last=True).head(SHIFT_TABLE_ROWS)
    s.add(table(top.select(cols), digits={"carbon_saving_gco2e": 0, "energy_kwh": 2}))


def quality_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("quality", "Data quality")
    if data.checks is None:
        s.missing(f"no data checks ({data.checks_why}): data quality not verified")
    else:
        checks = data.checks.with_columns((~pl.col("success").fill_null(False)).alias("failed"))
        failed = int(checks["failed"].sum())
        s.note(f"{checks.height - failed} of {checks.height} checks passed; {failed} failed (highlighted).")
        cols = [c for c in ("suite", "expectation", "severity", "success", "observed_value", "failed") if c in checks.columns]
        order = [c for c in ("failed", "suite", "expectation") if c in cols]
        s.add(table(checks.select(cols).sort(order, descending=[True] + [False] * (len(order) - 1)), bad="failed"))
    if data.quarantine is None:
        s.note(f"Quarantine: {data.quarantine_why} (no readings set aside).")
    else:
        s.add(figs.div(figures.bar(data.quarantine["reason"].to_list(), data.quarantine["rows"].to_list(),
                                   "Quarantined GPU readings by reason", "reason", "readings (count)")))
    if data.coverage is not None and _has(data.coverage, "host", "coverage_ratio"):
        per = data.coverage.group_by("host").agg(pl.col("coverage_ratio").mean()).sort("host")
    elif data.energy is not None and _has(data.energy, "coverage_ratio"):
        per = data.energy.group_by("host").agg(pl.col("coverage_ratio").mean()).sort("host")
    else:
        s.missing("no coverage figures: neither fct_gpu_coverage_daily nor coverage_ratio in the hourly energy")
        return s
    fig = figures.bar(per["host"].to_list(), per["coverage_ratio"].to_list(), "Mean GPU coverage by host",
                      "host", "coverage (share of the day, 0-1)")
    fig.update_yaxes(range=[0, 1.05])
    s.add(figs.div(fig))
    return s


def recommendations_section(data: ReportData) -> Section:
    s = Section("recommendations", "Recommendations")
    if data.recs is None:
        s.missing(f"no recommendations ({data.recs_why})")
    else:
        cols = [c for c in ("host", "gpu_uuid", "gpu_model", "workload_class", "power_limit_w", "default_limit_w",
                            "locked_sm_clock_min_mhz", "locked_sm_clock_max_mhz", "expected_saving_pct",
                            "expected_slowdown_pct", "reason") if c in data.recs.columns]
        s.add(table(data.recs.select(cols).sort(cols[:2]), digits={"power_limit_w": 0, "default_limit_w": 0}))
    if data.models is not None and "passed_gate" in data.models.columns:
        failed = data.models.filter(~pl.col("passed_gate").fill_null(False))
        if failed.height:
            s.add("<h3>GPU models left out of the export</h3>")
            s.add(table(failed.select([c for c in ("gpu_model", "feature_set", "mape_pct", "gate_reason") if c in failed.columns])))
        else:
            s.note("Every GPU model's power model passed its gate: none left out of the export.")
    return s


def render_report(con, day: dt.date | str, out_path: Path, *, notes: dict | None = None) -> Path:
    """Write the day's report to `out_path` (atomically) and return the path."""
    day = dt.date.fromisoformat(str(day)) if not isinstance(day, dt.date) else day
    notes = dict(notes or {})
    data = ReportData(con, day, notes)
    figs = FigureWriter()
    sections = [summary_section(data, notes), energy_section(data, figs), models_section(data, figs),
                carbon_cost_section(data, figs), quality_section(data, figs), recommendations_section(data)]
    text = page(f"joulehouse daily report: {day.isoformat()}", "GPU fleet energy, carbon, cost and power settings "
                "(UTC day; energy is GPU board energy unless said otherwise)", sections, get_plotlyjs())
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out_path)
    return out_path
