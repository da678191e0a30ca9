"""The report's joint sensitivity: S and its three parts per workload class, in plain words, beside
the source's typical values (fct_sensitivity_daily), and S over the day's sliding windows
(fct_sensitivity_hourly). The numbers are the warehouse's (models.joint_sensitivity); this module
only lays them out."""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl

from joulehouse.reports.page.blocks import FigureWriter, Section, fmt_number, table
from joulehouse.reports.page.figures import LAYOUT
from joulehouse.reports.page.relations import ReportData, has

PARTS = {"joint_part_pue": "PUE part", "joint_part_idle_share": "idle-share part",
         "joint_part_network_bandwidth": "bandwidth part", "joint_sensitivity_s": "S"}
EXPLAIN = (
    "S says how the energy efficiency of the facility, the GPUs and the network moves together when the fleet "
    "draws more power: S = dPUE/dE + w1·d(1−utilisation)/dE + w2·d(bandwidth occupancy)/dE. Each part is a change "
    "per relative change of power (per ln E), so a part of 0.4 means 10% more power comes with 0.04 more of it. "
    "The PUE part is how much the facility overhead rises with IT load (negative: the cooling and losses are "
    "spread over more work). The idle-share part is how the GPUs' idle time moves with their power (negative: "
    "the power goes to work, not to waiting). The bandwidth part is how much fuller the GPUs' busiest links "
    "(NVLink, PCIe) get as they draw more (positive: the work communicates as it computes, so the network can become "
    "the limit). Beside each class, the source's typical values: training-dense work (compared with the throughput "
    "class) 0.18, −0.62, 0.41; inference serving (the latency-sensitive class) 0.12, −0.33, 0.57.")


def _interval(row: dict, digits: int = 3) -> str:
    return (f"{fmt_number(row['estimate'], digits)} ({fmt_number(row['ci_low'], digits)} to "
            f"{fmt_number(row['ci_high'], digits)})")


def _stands(row: dict) -> str:
    """Where an estimate stands against its typical value, in words (its interval decides)."""
    typical = row.get("typical_value")
    if typical is None:
        return "no typical value for this class"
    if row["ci_low"] <= typical <= row["ci_high"]:
        return f"in line with the typical {fmt_number(typical, 3)}"
    side = "above" if row["estimate"] > typical else "below"
    return f"{side} the typical {fmt_number(typical, 3)}"


def _sentences(rows: pl.DataFrame) -> list[str]:
    out = []
    for scope in rows["scope"].unique(maintain_order=True).to_list():
        by = {r["quantity"]: r for r in rows.filter(pl.col("scope") == scope).to_dicts()}
        s = by.get("joint_sensitivity_s")
        if s is None:
            continue
        against = f" against {s['typical_workload']}" if s.get("typical_workload") else ""
        parts = "; ".join(f"{PARTS[q]} {_interval(by[q])}, {_stands(by[q])}" for q in PARTS
                          if q in by and q != "joint_sensitivity_s")
        out.append(f"{scope}{against}: S = {_interval(s)}, {_stands(s)} "
                   f"(w1 = {fmt_number(s['weight_utilization'], 2)}, w2 = {fmt_number(s['weight_network_bandwidth'], 2)}). "
                   f"{parts}.")  # plain text: the template escapes it
    return out


def parts_figure(rows: pl.DataFrame) -> go.Figure:
    """Each class's S and parts with their 95% intervals, and the typical values as crosses."""
    fig = go.Figure()
    labels = [PARTS[q] for q in PARTS]
    for scope in rows["scope"].unique(maintain_order=True).to_list():
        part = rows.filter(pl.col("scope") == scope)
        by = {r["quantity"]: r for r in part.to_dicts()}
        present = [q for q in PARTS if q in by]
        est = [by[q]["estimate"] for q in present]
        fig.add_trace(go.Scatter(
            x=[PARTS[q] for q in present], y=est, mode="markers", name=f"{scope} (95% CI)", marker=dict(size=10),
            error_y=dict(type="data", symmetric=False, array=[by[q]["ci_high"] - by[q]["estimate"] for q in present],
                         arrayminus=[by[q]["estimate"] - by[q]["ci_low"] for q in present])))
        typical = [(PARTS[q], by[q]["typical_value"]) for q in present if by[q].get("typical_value") is not None]
        if typical:
            fig.add_trace(go.Scatter(x=[t[0] for t in typical], y=[t[1] for t in typical], mode="markers",
                                     marker=dict(symbol="x", size=11), name=f"typical for {scope}"))
    fig.add_hline(y=0, line=dict(color="grey", dash="dash"))
    fig.update_xaxes(categoryorder="array", categoryarray=labels)
    fig.update_layout(title="Joint sensitivity S and its parts, per workload class, against the typical values",
                      yaxis_title="per ln(power) (see the text)", **LAYOUT)
    return fig


def windows_figure(hourly: pl.DataFrame) -> go.Figure:
    """S over the sliding windows, one line per class, with its 95% band."""
    fig = go.Figure()
    rows = hourly.filter(pl.col("quantity") == "joint_sensitivity_s").sort("hour_at")
    for scope in rows["scope"].unique(maintain_order=True).to_list():
        part = rows.filter(pl.col("scope") == scope)
        hours = part["hour_at"].to_list()
        fig.add_trace(go.Scatter(x=hours + hours[::-1], y=part["ci_high"].to_list() + part["ci_low"].to_list()[::-1],
                                 fill="toself", line=dict(width=0), opacity=0.2, showlegend=False, hoverinfo="skip"))
        fig.add_trace(go.Scatter(x=hours, y=part["estimate"].to_list(), mode="lines+markers", name=scope))
    fig.add_hline(y=0, line=dict(color="grey", dash="dash"))
    fig.update_layout(title="S over the sliding window ending at each hour (UTC)", yaxis_title="S", **LAYOUT)
    return fig


def joint_sensitivity_block(data: ReportData, figs: FigureWriter, s: Section) -> None:
    s.heading("Joint sensitivity of PUE, utilisation and network bandwidth")
    rows = data.sensitivity.filter(pl.col("quantity").is_in(list(PARTS))) if has(data.sensitivity, "quantity") else None
    if rows is None or rows.height == 0:
        s.missing(f"no joint sensitivity ({data.sensitivity_why or 'fct_sensitivity_daily has no joint_* rows'}); "
                  "it needs link occupancy (fct_link_bandwidth_hourly), activity and, for the PUE part, facility meters")
        return
    s.note(EXPLAIN)
    sentences = _sentences(rows)
    if sentences:
        s.bullets(sentences)
    s.add(figs.div(parts_figure(rows)))
    cols = [c for c in ("scope", "quantity", "estimate", "ci_low", "ci_high", "typical_value", "typical_workload",
                        "weight_utilization", "weight_network_bandwidth", "n_obs", "n_groups", "method") if c in rows.columns]
    labels = {c: f"{c.replace('_', ' ')} (per ln power)" for c in ("estimate", "ci_low", "ci_high", "typical_value")}
    labels |= {"weight_utilization": "w1 (0-1)", "weight_network_bandwidth": "w2 (0-1)"}
    shown = rows.select(cols).sort("scope", "quantity").rename({c: labels[c] for c in cols if c in labels})
    s.add(table(shown, digits={labels[c]: 3 for c in ("estimate", "ci_low", "ci_high", "typical_value")},
                source="fct_sensitivity_daily"))
    if has(data.sensitivity_hourly, "hour_at", "estimate"):
        s.add(figs.div(windows_figure(data.sensitivity_hourly)))
    else:
        s.missing(f"no sliding-window estimate ({data.sensitivity_hourly_why})")
