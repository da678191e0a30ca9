"""The report's plotly figures: polars frames in, `plotly.graph_objects.Figure` out (no I/O).

Every axis names its quantity and unit. Colours follow the GPU model, team or stage so one
legend reads the same across figures. Each function expects the columns its docstring names.
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from joulehouse.reports.accounts.attribution import sum_known

LAYOUT = dict(
    template="plotly_white", height=380, margin=dict(l=70, r=30, t=60, b=60),
    legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0), font=dict(size=12),
)
MAX_GPU_BARS = 64
# A line over fewer points than this says less than a sentence (one hour draws a 1 ms axis).
MIN_LINE_POINTS = 3
THERMAL_QUANTITIES = {"theta_c_per_w": "thermal resistance θ"}


def _figure(title: str, x_title: str, y_title: str | None, **layout) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=dict(text=title, y=0.98), xaxis_title=x_title, yaxis_title=y_title, **{**LAYOUT, **layout})
    return fig


def fleet_power_by_model(hourly: pl.DataFrame) -> go.Figure:
    """Stacked hourly fleet GPU power (kW) per GPU model. Columns: hour_at, gpu_model, avg_power_w."""
    # NULL where none of the model's GPUs was measured in the hour (polars' sum of NULLs was 0 kW)
    per = (hourly.group_by("hour_at", "gpu_model").agg((sum_known("avg_power_w") / 1000).alias("power_kw"))
           .sort("gpu_model", "hour_at"))
    unknown = per["power_kw"].null_count()
    # a stacked area draws a missing point at 0 (plotly's stackgaps): the title says how many
    said = f"; {unknown} model-hours without measured power, drawn at 0" if unknown else ""
    fig = _figure(f"Fleet GPU power by GPU model (hourly average{said})", "hour (UTC)", "power (kW)")
    for model in per["gpu_model"].unique(maintain_order=True):
        part = per.filter(pl.col("gpu_model") == model)
        fig.add_trace(go.Scatter(x=part["hour_at"].to_list(), y=part["power_kw"].to_list(), name=model,
                                 stackgroup="power", mode="lines"))
    return fig


def energy_by_host(hourly: pl.DataFrame) -> go.Figure:
    """Energy per host (kWh), stacked by GPU model. Columns: host, gpu_model, energy_kwh."""
    per = hourly.group_by("host", "gpu_model").agg(sum_known("energy_kwh")).sort("gpu_model", "host")  # no bar: unknown
    fig = _figure("GPU energy by host", "host", "energy (kWh)", barmode="stack")
    for model in per["gpu_model"].unique(maintain_order=True):
        part = per.filter(pl.col("gpu_model") == model)
        fig.add_trace(go.Bar(x=part["host"].to_list(), y=part["energy_kwh"].to_list(), name=model))
    return fig


def energy_by_gpu(hourly: pl.DataFrame) -> go.Figure:
    """Energy per GPU (kWh), the largest MAX_GPU_BARS. Columns: host, gpu_uuid, gpu_model, energy_kwh."""
    every = hourly.group_by("host", "gpu_uuid", "gpu_model").agg(sum_known("energy_kwh"))
    # a GPU never measured that day has no bar (it had one of 0 kWh); the title counts it
    per = (every.drop_nulls("energy_kwh")
           .with_columns((pl.col("host") + " " + pl.col("gpu_uuid").str.slice(0, 12)).alias("label"))
           .sort(["energy_kwh", "label"], descending=[True, False]).head(MAX_GPU_BARS))
    unmeasured = every["energy_kwh"].null_count()
    shown = ("" if per.height < MAX_GPU_BARS else f" (top {MAX_GPU_BARS})") + (
        f" ({unmeasured} GPUs without measured energy not drawn)" if unmeasured else "")
    fig = _figure(f"GPU energy per GPU{shown}", "GPU (host, UUID prefix)", "energy (kWh)", barmode="overlay")
    for model in sorted(per["gpu_model"].unique().to_list()):
        part = per.filter(pl.col("gpu_model") == model)
        fig.add_trace(go.Bar(x=part["label"].to_list(), y=part["energy_kwh"].to_list(), name=model))
    fig.update_xaxes(categoryorder="total descending", tickangle=-45)
    return fig


def predicted_vs_measured(residual: pl.DataFrame) -> go.Figure:
    """Model-predicted vs measured energy per GPU-hour (kWh), one colour per GPU model, with the
    line of perfect prediction. Columns: gpu_model, measured_energy_kwh, predicted_energy_kwh."""
    fig = _figure("Power model: predicted vs measured energy per GPU-hour",
                  "measured energy (kWh per GPU-hour)", "predicted energy (kWh per GPU-hour)")
    for model in sorted(residual["gpu_model"].unique().to_list()):
        part = residual.filter(pl.col("gpu_model") == model)
        fig.add_trace(go.Scatter(x=part["measured_energy_kwh"].to_list(), y=part["predicted_energy_kwh"].to_list(),
                                 mode="markers", name=model, marker=dict(size=6, opacity=0.7)))
    top = float(residual.select(pl.max_horizontal("measured_energy_kwh", "predicted_energy_kwh").max()).item() or 1.0)
    fig.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="predicted = measured",
                             line=dict(color="grey", dash="dash")))
    return fig


def residual_by_temperature(residual: pl.DataFrame) -> go.Figure:
    """Residual (% of measured energy) against the hour's mean GPU temperature (°C).
    Columns: gpu_model, avg_temp_c, residual_pct."""
    fig = _figure("Power model residuals by GPU temperature", "mean GPU temperature (°C)",
                  "residual (% of measured energy)")
    for model in sorted(residual["gpu_model"].unique().to_list()):
        part = residual.filter(pl.col("gpu_model") == model)
        fig.add_trace(go.Scatter(x=part["avg_temp_c"].to_list(), y=part["residual_pct"].to_list(), mode="markers",
                                 name=model, marker=dict(size=6, opacity=0.7)))
    fig.add_hline(y=0, line=dict(color="grey", dash="dash"))
    return fig


def energy_vs_limit(curve: pl.DataFrame) -> go.Figure:
    """Energy to solution (kWh) against the power limit (W), one line per GPU model.
    Columns: gpu_model, power_limit_w, energy_kwh."""
    fig = _figure("Energy to solution vs power limit", "power limit (W)", "energy to solution (kWh)")
    for model in sorted(curve["gpu_model"].unique().to_list()):
        part = curve.filter(pl.col("gpu_model") == model).sort("power_limit_w")
        fig.add_trace(go.Scatter(x=part["power_limit_w"].to_list(), y=part["energy_kwh"].to_list(),
                                 mode="lines+markers", name=model))
    return fig


def thermal_ranking(thermal: pl.DataFrame, value_col: str, unit: str) -> go.Figure:
    """GPUs ranked by `value_col` (hottest first), coloured by GPU model.
    Columns: gpu_uuid, gpu_model, host (optional), value_col."""
    label = (pl.col("host") + " " + pl.col("gpu_uuid").str.slice(0, 12)) if "host" in thermal.columns else pl.col("gpu_uuid")
    ranked = (thermal.filter(pl.col(value_col).is_not_null()).with_columns(label.alias("label"))
              .sort([value_col, "label"], descending=[True, False]).head(MAX_GPU_BARS))
    quantity = THERMAL_QUANTITIES.get(value_col, value_col.replace("_", " "))
    fig = _figure(f"Thermal ranking: {quantity}, worst-cooled first", "GPU (host, UUID prefix)", f"{quantity} ({unit})")
    for model in sorted(ranked["gpu_model"].unique().to_list()):
        part = ranked.filter(pl.col("gpu_model") == model)
        fig.add_trace(go.Bar(x=part["label"].to_list(), y=part[value_col].to_list(), name=model))
    fig.update_xaxes(categoryorder="total descending", tickangle=-45)
    return fig


def by_team_and_stage(rows: pl.DataFrame, value_col: str, scale: float, title: str, y_title: str) -> go.Figure:
    """Stacked bars per team, one colour per stage, of `value_col` x `scale`.
    Columns: team, stage, value_col."""
    per = (rows.group_by("team", "stage").agg((sum_known(value_col) * scale).alias("value"))  # unknown: no bar
           .sort("stage", "team"))
    fig = _figure(title, "team", y_title, barmode="stack")
    for stage in per["stage"].unique(maintain_order=True):
        part = per.filter(pl.col("stage") == stage)
        fig.add_trace(go.Bar(x=part["team"].to_list(), y=part["value"].to_list(), name=stage))
    return fig


def context_against_load(load: pl.DataFrame, context: pl.DataFrame, value_col: str, title: str, y2_title: str,
                         load_label: str = "fleet GPU power") -> go.Figure:
    """Fleet load (kW, bars) and an hourly context series (line, right axis) such as grid
    intensity or price. Columns: load hour_at, power_kw; context hour_at, value_col."""
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=load["hour_at"].to_list(), y=load["power_kw"].to_list(), name=load_label,
                         marker_color="#9ecae1"), secondary_y=False)
    ctx = context.filter(pl.col(value_col).is_not_null()).sort("hour_at")
    fig.add_trace(go.Scatter(x=ctx["hour_at"].to_list(), y=ctx[value_col].to_list(), name=y2_title,
                             mode="lines+markers", line=dict(color="#d62728")), secondary_y=True)
    fig.update_layout(title=dict(text=title, y=0.98), **LAYOUT)
    fig.update_xaxes(title_text="hour (UTC)")
    fig.update_yaxes(title_text=f"{load_label} (kW)", secondary_y=False)
    fig.update_yaxes(title_text=y2_title, secondary_y=True)
    return fig


def shift_saving_by_team(shift: pl.DataFrame) -> go.Figure:
    """Per team, what time-shifting its deferrable jobs would have saved: carbon (kgCO2e, left
    axis) and energy cost (USD, right axis). Columns: team, carbon_saving_gco2e, cost_saving_usd."""
    # a plan not made (NULL) draws no bar, never a saving of 0
    per = shift.group_by("team").agg((sum_known("carbon_saving_gco2e") / 1000).alias("kg"),
                                     sum_known("cost_saving_usd").alias("usd")).sort("team")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=per["team"].to_list(), y=per["kg"].to_list(), name="carbon saving", offsetgroup="carbon",
                         marker_color="#31a354"), secondary_y=False)
    fig.add_trace(go.Bar(x=per["team"].to_list(), y=per["usd"].to_list(), name="energy cost saving", offsetgroup="cost",
                         marker_color="#fd8d3c"), secondary_y=True)
    fig.update_layout(title=dict(text="What shifting deferrable jobs to the best hours would have saved", y=0.98),
                      barmode="group", **LAYOUT)
    fig.update_xaxes(title_text="team")
    fig.update_yaxes(title_text="carbon saving (kgCO2e)", secondary_y=False)
    fig.update_yaxes(title_text="energy cost saving (USD)", secondary_y=True)
    return fig


def bar(labels: list, values: list, title: str, x_title: str, y_title: str) -> go.Figure:
    """A plain bar chart (quarantine counts by reason, coverage by host...)."""
    fig = _figure(title, x_title, y_title)
    fig.add_trace(go.Bar(x=labels, y=values, showlegend=False))
    return fig


def pue_by_hour(pue: pl.DataFrame) -> go.Figure:
    """PUE per hour (facility energy / IT energy), one line per site. Columns: hour_at, site, pue."""
    fig = _figure("PUE by hour", "hour (UTC)", "PUE (facility / IT energy, ratio)")
    for site in sorted(pue["site"].unique().to_list()):
        part = pue.filter(pl.col("site") == site).sort("hour_at")
        fig.add_trace(go.Scatter(x=part["hour_at"].to_list(), y=part["pue"].to_list(), mode="lines+markers",
                                 name=f"PUE {site}"))
    return fig


def residual_share_by_hour(reconciliation: pl.DataFrame) -> go.Figure:
    """Share of each server's BMC energy its GPUs do not account for (CPU, fans, PSU loss), per
    hour and host, in %. Columns: hour_at, host, residual_share (0-1)."""
    fig = _figure("Node reconciliation: server energy not drawn by its GPUs", "hour (UTC)",
                  "residual share (% of server energy)")
    for host in sorted(reconciliation["host"].unique().to_list()):
        part = reconciliation.filter(pl.col("host") == host).sort("hour_at")
        fig.add_trace(go.Scatter(x=part["hour_at"].to_list(), y=(part["residual_share"] * 100).to_list(),
                                 mode="lines+markers", name=host, marker=dict(size=4)))
    return fig


def coverage_per_gpu(coverage: pl.DataFrame) -> go.Figure:
    """Share of the day each GPU has valid readings (0-1), worst first (at most MAX_GPU_BARS),
    coloured by GPU model. Columns: host, gpu_uuid, gpu_model, coverage_ratio."""
    ranked = (coverage.filter(pl.col("coverage_ratio").is_not_null())
              .with_columns((pl.col("host") + " " + pl.col("gpu_uuid").str.slice(0, 12)).alias("label"))
              .sort(["coverage_ratio", "label"]).head(MAX_GPU_BARS))
    shown = "" if coverage.height <= MAX_GPU_BARS else f" (worst {MAX_GPU_BARS} of {coverage.height})"
    fig = _figure(f"Coverage per GPU{shown}", "GPU (host, UUID prefix)", "coverage (share of the day, 0-1)")
    for model in sorted(ranked["gpu_model"].unique().to_list()):
        part = ranked.filter(pl.col("gpu_model") == model)
        fig.add_trace(go.Bar(x=part["label"].to_list(), y=part["coverage_ratio"].to_list(), name=model))
    fig.update_xaxes(categoryorder="total ascending", tickangle=-45)
    fig.update_yaxes(range=[0, 1.05])
    return fig
