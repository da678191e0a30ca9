"""Report figures of estimates with their uncertainty: sensitivities (forest plot), what the
recommendations realised against what they predicted, efficiency per GPU model and power limit,
and the cross-model job energy prediction. Polars frames in, plotly figures out (no I/O).

Every axis names its quantity and unit; an interval is drawn as error bars around the estimate.
"""

from __future__ import annotations

import plotly.graph_objects as go
import polars as pl
from plotly.subplots import make_subplots

from joulehouse.reports.page.figures import LAYOUT, _figure
from joulehouse.reports.page.relations import saving_basis

MAX_OUTCOME_ROWS = 30
EFFICIENCY_METRICS = (
    ("requests_per_kwh", "EPOE (requests/kWh)", "higher is better"),
    ("j_per_token", "energy per token (J/token)", "lower is better"),
    ("j_per_sample", "energy per sample (J/sample)", "lower is better"),
    ("flops_per_w", "FLOPs per watt (FLOP/s per W)", "higher is better"),
)


def _errors(frame: pl.DataFrame, est: str, low: str, high: str) -> dict:
    """plotly error-bar arrays (distance above and below the estimate); NULL bounds draw no bar."""
    above = (frame[high] - frame[est]).to_list()
    below = (frame[est] - frame[low]).to_list()
    return dict(type="data", symmetric=False, array=above, arrayminus=below, thickness=1.5, width=6)


def sensitivity_forest(rows: pl.DataFrame) -> go.Figure:
    """Forest plot: each sensitivity's estimate with its 95% interval, one panel per unit (an
    elasticity and a per-°C slope do not share an axis). A zero line shows which intervals
    exclude "no effect". Columns: quantity, scope, estimate, ci_low, ci_high, unit."""
    rows = rows.with_columns(pl.col("unit").fill_null("unit not stated"),
                             (pl.col("quantity").str.replace_all("_", " ") + " [" + pl.col("scope").fill_null("") + "]").alias("label"))
    units = rows["unit"].unique(maintain_order=True).to_list()
    fig = make_subplots(rows=len(units), cols=1, vertical_spacing=0.22 if len(units) > 1 else 0.1,
                        row_heights=[max(1, rows.filter(pl.col("unit") == u).height) for u in units])
    for i, unit in enumerate(units, start=1):
        part = rows.filter(pl.col("unit") == unit)
        fig.add_trace(go.Scatter(x=part["estimate"].to_list(), y=part["label"].to_list(), mode="markers",
                                 marker=dict(size=9, color="#2b6cb0"), error_x=_errors(part, "estimate", "ci_low", "ci_high"),
                                 name="estimate, 95% CI", showlegend=i == 1), row=i, col=1)
        fig.add_vline(x=0, line=dict(color="grey", dash="dash"), row=i, col=1)
        fig.update_xaxes(title_text=f"estimate ({unit})", row=i, col=1)
    fig.update_layout(title=dict(text="Sensitivities with 95% confidence intervals", y=0.98),
                      **{**LAYOUT, "height": 160 + 110 * rows.height, "margin": dict(l=330, r=30, t=60, b=60)})
    return fig


def whole_text(column: str, missing: str | None = "-") -> pl.Expr:
    """A number column as whole-number text, `missing` where it is NULL, NaN or infinite: a strict
    cast of one NaN or infinite watt value to an integer stopped the whole day's report."""
    value = pl.col(column).cast(pl.Float64)
    text = pl.when(value.is_finite()).then(value.round(0)).cast(pl.Int64, strict=False).cast(pl.String)
    return text if missing is None else text.fill_null(missing)


def outcome_label(rows: pl.DataFrame) -> pl.Expr:
    """'GPU model: 400->300 W (4 GPUs measured)' for pooled rows, 'host UUID-prefix: 400->300 W' per GPU."""
    change = whole_text("power_limit_w_before") + "→" + whole_text("power_limit_w_after") + " W"
    per_gpu = pl.col("host").fill_null("") + " " + pl.col("gpu_uuid").fill_null("").str.slice(0, 12) + ": " + change
    # n_treated_gpus of a pooled row counts the GPUs estimated, not all that took the setting (the
    # row's note says how many did): "all 2 GPUs" named a setting three GPUs took
    gpus = pl.when(pl.col("n_treated_gpus") == 1).then(pl.lit("1 GPU measured")).otherwise(
        pl.col("n_treated_gpus").cast(pl.String) + " GPUs measured")
    pooled = pl.col("gpu_model") + ": " + change + " (" + gpus + ")"
    return pl.when(pl.col("scope") == "gpu").then(per_gpu).otherwise(pooled)


def outcome_saving(outcome: pl.DataFrame) -> go.Figure:
    """Realised saving (% of energy per unit of work, or of busy power: saving_basis; 95% CI as error bars) next to the predicted
    saving, per recommendation that took effect; pooled model/setting rows first.
    Columns: scope, host, gpu_uuid, gpu_model, power_limit_w_before/after, n_treated_gpus,
    realised_saving_pct, saving_ci_low_pct, saving_ci_high_pct, predicted_saving_pct."""
    rows = (outcome.with_columns(outcome_label(outcome).alias("label"), (pl.col("scope") == "gpu").alias("per_gpu"))
            .sort(["per_gpu", "gpu_model", "label"]).head(MAX_OUTCOME_ROWS))
    fig = _figure("What the recommendations saved: realised vs predicted", f"saving (% of {saving_basis(outcome)})", None,
                  height=200 + 34 * rows.height, margin=dict(l=330, r=30, t=70, b=60))
    fig.add_trace(go.Scatter(x=rows["realised_saving_pct"].to_list(), y=rows["label"].to_list(), mode="markers",
                             marker=dict(size=10, color="#2f855a"), name="realised (95% CI)",
                             error_x=_errors(rows, "realised_saving_pct", "saving_ci_low_pct", "saving_ci_high_pct")))
    if "predicted_saving_pct" in rows.columns and rows["predicted_saving_pct"].null_count() < rows.height:
        fig.add_trace(go.Scatter(x=rows["predicted_saving_pct"].to_list(), y=rows["label"].to_list(), mode="markers",
                                 marker=dict(size=11, symbol="diamond-open", color="#c05621", line=dict(width=2)),
                                 name="predicted"))
    fig.add_vline(x=0, line=dict(color="grey", dash="dash"))
    fig.update_yaxes(autorange="reversed")  # the tick labels name each recommendation; pooled rows on top
    return fig


def efficiency_by_setting(rows: pl.DataFrame) -> go.Figure:
    """Energy per unit of work per GPU model and power limit: one panel per metric that any row
    has (EPOE, J/token, J/sample, FLOPs/W). Columns: gpu_model, power_limit_w, and the metrics."""
    metrics = [m for m in EFFICIENCY_METRICS if m[0] in rows.columns and rows[m[0]].null_count() < rows.height]
    rows = rows.with_columns((pl.col("gpu_model").str.replace("NVIDIA ", "") + " @ "
                              + whole_text("power_limit_w") + " W").alias("label"))
    n_cols = 2 if len(metrics) > 1 else 1
    n_rows = (len(metrics) + n_cols - 1) // n_cols
    fig = make_subplots(rows=n_rows, cols=n_cols, subplot_titles=[f"{t.split(' (')[0]}: {better}" for _, t, better in metrics],
                        horizontal_spacing=0.14, vertical_spacing=0.28 if n_rows > 1 else 0.1)
    for i, (col, title, _) in enumerate(metrics):
        row, column = i // n_cols + 1, i % n_cols + 1
        part = rows.filter(pl.col(col).is_not_null()).sort("label")
        fig.add_trace(go.Bar(x=part["label"].to_list(), y=part[col].to_list(), name=title, showlegend=False,
                             marker_color="#4c78a8"), row=row, col=column)
        fig.update_yaxes(title_text=title, row=row, col=column)
        fig.update_xaxes(title_text="GPU model @ power limit (W)" if row == n_rows else None, row=row, col=column)
    fig.update_layout(title=dict(text="Energy per unit of work by GPU model and power limit", y=0.99),
                      **{**LAYOUT, "height": 320 * n_rows + 60, "margin": dict(l=80, r=30, t=80, b=70)})
    fig.update_annotations(font_size=11)
    return fig


def job_prediction_error(rows: pl.DataFrame) -> go.Figure:
    """Predicted vs measured energy of the same job on another GPU model (kWh), with the error
    (%) in the hover. Columns: job_id, from_gpu_model, to_gpu_model, predicted_energy_kwh,
    measured_energy_kwh, error_pct."""
    rows = rows.with_columns((pl.col("from_gpu_model").str.replace("NVIDIA ", "") + " → "
                              + pl.col("to_gpu_model").str.replace("NVIDIA ", "")).alias("pair"))
    fig = _figure("Job energy predicted on another GPU model vs measured there", "measured energy on the target model (kWh)",
                  "predicted energy (kWh)")
    for pair in sorted(rows["pair"].unique().to_list()):
        part = rows.filter(pl.col("pair") == pair)
        fig.add_trace(go.Scatter(x=part["measured_energy_kwh"].to_list(), y=part["predicted_energy_kwh"].to_list(),
                                 mode="markers", name=pair, marker=dict(size=10),
                                 text=[f"{j}: error {e:+.1f}%" if e is not None else j
                                       for j, e in zip(part["job_id"].to_list(), part["error_pct"].to_list())],
                                 hovertemplate="%{text}<extra></extra>"))
    top = float(rows.select(pl.max_horizontal("measured_energy_kwh", "predicted_energy_kwh").max()).item() or 1.0)
    fig.add_trace(go.Scatter(x=[0, top * 1.05], y=[0, top * 1.05], mode="lines", name="predicted = measured",
                             line=dict(color="grey", dash="dash")))
    return fig
