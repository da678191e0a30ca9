"""The daily HTML report: one file a person opens offline in a browser (with the one plotly.js
beside it, or that too inlined: `plotly_js`).

`render_report(con, day, out_path)` reads whichever warehouse relations exist for `day` and
writes: a summary (fleet energy kWh, carbon kgCO2e location- and market-based, cost USD, the top
things to do with their expected saving, and everything not computed), then recommendations
(with what earlier ones realised), energy, efficiency, power models, carbon and cost, and data
quality. Each relation that is missing, or has no rows for the day, gets a plain sentence saying
what was not computed and why; the summary repeats those sentences.

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

import polars as pl
from plotly.offline import get_plotlyjs
from markupsafe import Markup

from joulehouse.reports.accounts.attribution import sum_known
from joulehouse.reports.page import figures
from joulehouse.reports.page.relations import ReportData, has, total
from joulehouse.reports.page.blocks import (FigureWriter, Section, fmt_kg, fmt_kwh, fmt_number, fmt_usd, page,
                                            shared_plotly, table)
from joulehouse.reports.page.section_summary import summary_section
from joulehouse.reports.page.section_efficiency_precision import precision_efficiency_block
from joulehouse.reports.page.section_actions import efficiency_section, recommendations_section
from joulehouse.reports.page.section_models import models_section
from joulehouse.reports.page.section_quality import quality_section


def energy_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("energy", "Energy")
    if data.energy is None:
        s.missing(f"no GPU energy ({data.energy_why}): energy figures not drawn")
    else:
        hours = data.energy["hour_at"].n_unique()
        if hours >= figures.MIN_LINE_POINTS:
            s.add(figs.div(figures.fleet_power_by_model(data.energy)))
        else:
            s.note(fleet_power_sentence(data.energy))
        s.add(figs.div(figures.energy_by_host(data.energy)))
        s.add(figs.div(figures.energy_by_gpu(data.energy)))
    if data.energy is not None and "energy_source" in data.energy.columns:
        by_source = (data.energy.drop_nulls("energy_source").group_by("energy_source")
                     .agg(pl.col("energy_kwh").sum()).sort("energy_source"))
        methods = {"counter": "from the GPUs' energy counters", "power_integral": "integrated from power readings"}
        # a GPU-hour with readings but nothing covered has no method (it read "0.0 kWh None")
        unmeasured = data.energy["energy_source"].null_count()
        s.note("Energy by method: " + "; ".join(
            [f"{fmt_kwh(r['energy_kwh'])} {methods.get(r['energy_source'], r['energy_source'])}"
             for r in by_source.iter_rows(named=True)]
            + ([f"{unmeasured:,} GPU-hours without measured energy"] if unmeasured else [])) + ".")
    rec = data.reconciliation
    if rec is None or not has(rec, "node_energy_kwh"):
        s.missing(f"no IPMI data ({data.reconciliation_why or 'no BMC readings for the day'}): server energy vs GPU energy not drawn")
    else:
        # the GPUs over the hours the BMC was read, not every hour: a server read for 12 h of 24 drew
        # less than its GPUs did all day; a host the BMC never answered for has no bar, not 0 kWh
        read = pl.col("node_energy_kwh").is_not_null()
        per = (rec.group_by("host")
               .agg(sum_known("node_energy_kwh"), pl.col("gpu_energy_kwh").filter(read).sum().alias("gpu_energy_kwh"),
                    read.any().alias("read"))
               .filter(pl.col("read")).sort("host"))
        unread = sorted(set(rec["host"].to_list()) - set(per["host"].to_list()))
        if unread:
            s.note(f"No BMC readings for {', '.join(unread)}: not drawn below.")
        fig = figures.energy_by_host(pl.concat([
            per.select("host", pl.lit("server (BMC)").alias("gpu_model"), pl.col("node_energy_kwh").alias("energy_kwh")),
            per.select("host", pl.lit("GPUs").alias("gpu_model"), pl.col("gpu_energy_kwh").alias("energy_kwh")),
        ]))
        fig.update_layout(barmode="group", title_text="Server (BMC) energy vs its GPUs' energy")
        s.add(figs.div(fig))
    return s


def carbon_cost_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("carbon-cost", "Carbon and cost")
    if data.carbon is None:
        s.missing(f"no carbon account ({data.carbon_why}): carbon by team and stage not computed")
    else:
        s.add(figs.div(figures.by_team_and_stage(data.carbon, "total_gco2e", 1e-3, "Carbon by team and stage",
                                                 "carbon, location-based, operational + embodied (kgCO2e)")))
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
        if has(context, "hour_at", col):
            s.add(figs.div(figures.context_against_load(load, context, col, title, unit, load_label)))
        else:
            s.missing(f"hourly context has no {col}: that figure not drawn")
    shift_block(data, figs, s)
    return s


SHIFT_TABLE_ROWS = 10


def shift_block(data: ReportData, figs: FigureWriter, s: Section) -> None:
    """What moving the deferrable jobs to the day's cleanest / cheapest hours would have saved."""
    s.heading("Time-shifting the deferrable jobs")
    if data.shift is None:
        s.missing(f"no shifting estimate ({data.shift_why}): no deferrable jobs, or the accounts were not run")
        return
    shift = data.shift
    carbon_g, cost = total(shift, "carbon_saving_gco2e"), total(shift, "cost_saving_usd")
    # a plan the accounts did not make (carbon or cost not run) is not computed, never a saving of 0
    plans = {"carbon": fmt_kg(carbon_g), "energy cost": fmt_usd(cost)}
    saved = " and ".join(f"{text} of {what}" for what, text in plans.items() if text != "-")
    unknown = " and ".join(what for what, text in plans.items() if text == "-")
    # some jobs' plans missing: the sums are of the others, and the sentence says so
    partial = [f"{n} job{'s' if n != 1 else ''}' {what} plan not computed" for what, column in
               (("carbon", "carbon_saving_gco2e"), ("energy cost", "cost_saving_usd"))
               if column in shift.columns and 0 < (n := shift[column].null_count()) < shift.height]
    s.note(f"{shift.height} deferrable jobs, {fmt_kwh(total(shift, 'energy_kwh'))} IT. Moved, same energy, to "
           f"the day's hours with the lowest PUE x grid intensity (or PUE x price), each hour taking at most the "
           f"fleet's idle GPU-hours in it: " + (f"{saved} would have been saved (two separate plans)" if saved else "")
           + (f"{'; ' if saved else ''}{unknown} not computed (its account was not run)" if unknown else "")
           + (f" ({'; '.join(partial)}: the sums are of the rest)" if partial else "") + ".")
    s.add(figs.div(figures.shift_saving_by_team(shift)))
    cols = [c for c in ("team", "job_id", "energy_kwh", "carbon_saving_gco2e", "best_carbon_hour_at", "cost_saving_usd",
                        "best_cost_hour_at") if c in shift.columns]
    top = shift.sort(["carbon_saving_gco2e", "job_id"], descending=[True, False], nulls_last=True).head(SHIFT_TABLE_ROWS)
    s.add(table(top.select(cols), digits={"carbon_saving_gco2e": 0, "energy_kwh": 2}, max_rows=SHIFT_TABLE_ROWS))
    if shift.height > SHIFT_TABLE_ROWS:
        s.note(f"{shift.height - SHIFT_TABLE_ROWS} smaller shifting opportunities hidden (SELECT * FROM rpt_shift_opportunity_daily).")


def fleet_power_sentence(energy: pl.DataFrame) -> str:
    """What a power curve over too few hours would have shown, said in words."""
    hours = sorted(energy["hour_at"].unique().to_list())
    # over each GPU's measured hours: an unmeasured hour (avg_power_w NULL) is no hour at 0 W
    per_gpu = energy.group_by("gpu_model", "gpu_uuid").agg(pl.col("avg_power_w").mean().alias("w"))
    per_model = (per_gpu.drop_nulls("w").group_by("gpu_model").agg(pl.col("w").sum(), pl.len().alias("gpus"))
                 .sort("w", descending=True))
    when = ", ".join(h.strftime("%H:00") for h in hours)
    # the model's GPUs together, and each: "587 W" alone read as one GPU's draw (it was 8 idle GPUs')
    models = "; ".join(f"{r['gpu_model']} {fmt_number(r['w'], 0)} W"
                       + (f" ({r['gpus']} GPUs, {fmt_number(r['w'] / r['gpus'], 0)} W each)" if r["gpus"] > 1 else
                          " (1 GPU)")
                       for r in per_model.iter_rows(named=True))
    return (f"Fleet GPU power: readings in {len(hours)} hour{'s' if len(hours) != 1 else ''} of the day only ({when} UTC), "
            f"too few for a curve. Mean board power over {'them' if len(hours) != 1 else 'it'}: {models}.")


def day_gpu_models(data: ReportData) -> list[str]:
    """Every GPU model the day's relations name, in a stable order (the colours follow it)."""
    found: set[str] = set()
    for attr in ReportData.RELATIONS:
        frame = getattr(data, attr)
        if frame is not None and "gpu_model" in frame.columns:
            found.update(m for m in frame["gpu_model"].unique().to_list() if m is not None)
    return sorted(found)


def render_report(con, day: dt.date | str, out_path: Path, *, notes: dict | None = None,
                  plotly_js: str = "shared") -> Path:
    """Write the day's report to `out_path` (atomically) and return the path.

    `plotly_js`: "shared" loads plotly.js (4.6 MB) from one copy beside the report, written once
    for every report in the folder, so a day's page is its data only; "inline" puts it in the page
    (a single file to mail, at 4.6 MB more)."""
    if plotly_js not in ("shared", "inline"):
        raise ValueError(f"plotly_js {plotly_js!r}: expected 'shared' or 'inline'")
    day = dt.date.fromisoformat(str(day)) if not isinstance(day, dt.date) else day
    notes = dict(notes or {})
    data = ReportData(con, day, notes)
    figs = FigureWriter(day_gpu_models(data))
    # Built in reading order except the summary, which gathers the others' "not computed" lines.
    recommendations = recommendations_section(data, figs)
    efficiency = efficiency_section(data, figs)
    precision_efficiency_block(data, efficiency)
    rest = [energy_section(data, figs), efficiency, models_section(data, figs),
            carbon_cost_section(data, figs), quality_section(data, figs)]
    summary = summary_section(data, [recommendations, *rest], notes)
    # The dashboard over every day held sits beside the daily reports (reports.dashboard).
    summary.blocks.insert(0, Markup('<p class="note"><a href="dashboard.html">All days: the carbon dashboard</a> '
                                    '(carbon and cost by team, GPU model and site per week and month).</p>'))
    sections = [summary, recommendations, *rest]
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    script = ({"plotly_src": shared_plotly(out_path.parent)} if plotly_js == "shared"
              else {"plotly_js": get_plotlyjs()})
    text = page(f"joulehouse daily report: {day.isoformat()}", "GPU fleet energy, carbon, cost and power settings "
                "(UTC day; energy is GPU board energy unless said otherwise)", sections, **script)
    tmp = out_path.with_name(f".{out_path.name}.{uuid.uuid4().hex[:8]}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, out_path)
    return out_path
