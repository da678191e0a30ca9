"""The report's "Power models" section: fit quality and drift per GPU model, predicted vs measured,
residuals by temperature, the energy-vs-limit curve, the thermal ranking, sensitivities with their
95% intervals, the best power interval per GPU model and bottleneck, and the cross-model job
energy prediction error."""

from __future__ import annotations

import math

import polars as pl

from joulehouse.reports.page import figures
from joulehouse.reports.page.figures_estimates import job_prediction_error, sensitivity_forest
from joulehouse.reports.page.relations import ReportData, has
from joulehouse.reports.page.blocks import FigureWriter, Section, details, fmt_number, table
from joulehouse.reports.page.section_sensitivity import PARTS as JOINT_PARTS
from joulehouse.reports.page.section_sensitivity import joint_sensitivity_block

MAX_SCATTER_POINTS = 5000
MODEL_COLUMNS = ("gpu_model", "feature_set", "n_samples", "mape_pct", "r2", "job_energy_error_pct", "static_pct_per_10c",
                 "dyn_freq_exponent", "dyn_freq_exponent_source", "drift_pct", "passed_gate", "gate_reason")


def _fits(data: ReportData, s: Section) -> None:
    if data.models is None:
        s.missing(f"no power-model fits ({data.models_why}): model quality unknown")
        return
    s.add(table(data.models.select([c for c in MODEL_COLUMNS if c in data.models.columns]).sort("gpu_model"),
                digits={"r2": 3, "dyn_freq_exponent": 2}, source="fct_power_model"))
    if has(data.models, "drift_warning"):
        drifted = data.models.filter(pl.col("drift_warning").fill_null(False))["gpu_model"].to_list()
        if drifted:
            s.warn(f"coefficients moved more than the threshold since the previous fit for {', '.join(sorted(drifted))}.",
                   lead="Drift warning: ")


def _residuals(data: ReportData, figs: FigureWriter, s: Section) -> None:
    if data.residual is None:
        s.missing(f"no residuals ({data.residual_why}): predicted vs measured not drawn")
        return
    points = data.residual.sample(MAX_SCATTER_POINTS, seed=0) if data.residual.height > MAX_SCATTER_POINTS else data.residual
    if has(points, "measured_energy_kwh", "predicted_energy_kwh"):
        s.add(figs.div(figures.predicted_vs_measured(points)))
    if has(points, "avg_temp_c", "residual_pct"):
        s.add(figs.div(figures.residual_by_temperature(points)))


def _thermal(data: ReportData, figs: FigureWriter, s: Section) -> None:
    thermal_col = next((c for c in (data.thermal.columns if data.thermal is not None else [])
                        if c.endswith("_c_per_w") or c.endswith("_temp_c")), None)
    if data.thermal is None or thermal_col is None:
        s.missing(f"no thermal fit ({data.thermal_why or 'fct_thermal_gpu has no *_c_per_w column'}): thermal ranking not drawn")
        return
    unit = "°C/W" if thermal_col.endswith("_c_per_w") else "°C"
    s.add(figs.div(figures.thermal_ranking(data.thermal, thermal_col, unit)))
    if has(data.thermal, "is_outlier"):
        outliers = data.thermal.filter(pl.col("is_outlier").fill_null(False))
        if outliers.height:
            cols = [c for c in ("host", "gpu_uuid", "gpu_model", "theta_c_per_w", "model_median_theta_c_per_w",
                                "theta_vs_model_pct", "inlet_c") if c in outliers.columns]
            s.note(f"{outliers.height} GPUs cool much worse or better than their model's median (check airflow, paste, slot):")
            s.add(table(outliers.select(cols).sort("theta_vs_model_pct", descending=True, nulls_last=True),
                        digits={"theta_c_per_w": 3, "model_median_theta_c_per_w": 3, "theta_vs_model_pct": 1},
                        max_rows=8, source="fct_thermal_gpu"))


# Each sensitivity in words: (what changes, by how much, what responds, how the answer is read).
SENSITIVITY_WORDS = {
    "energy_elasticity_to_utilization": ("GPU activity", "10% more", "GPU energy", "pct"),
    "energy_elasticity_to_memory_bandwidth": ("memory (DRAM) activity", "10% more", "GPU energy", "pct"),
    "pue_elasticity_to_it_load": ("IT load", "10% more", "PUE", "pct"),
    "pue_per_outdoor_c": ("outdoor temperature", "1 °C warmer", "PUE", "abs"),
    "energy_elasticity_to_network_bandwidth": ("network link occupancy", "10% more", "GPU energy", "pct"),
}
METHOD_WORDS = {"ols-fe+gpu-bootstrap": "least squares within each GPU model, interval by resampling GPUs (bootstrap)",
                "ols": "ordinary least squares"}


def _decimals(*values: float | None, least: int) -> int:
    """Decimals that give the smallest non-zero |value| two significant digits (at least `least`, at most 6)."""
    smallest = min((abs(v) for v in values if v), default=1.0)
    return min(6, max(least, 1 - math.floor(math.log10(smallest))))


def sensitivity_sentence(row: dict) -> str:
    """'10% more GPU activity goes with 5.1% more GPU energy (95% interval 4.7 to 5.5%), at fleet.'"""
    words = SENSITIVITY_WORDS.get(row["quantity"])
    where = f" ({row['scope']})" if row.get("scope") not in (None, "fleet") else ""
    if words is None:
        return f"{row['quantity'].replace('_', ' ')}{where}: {fmt_number(row['estimate'], 3)} {row.get('unit') or ''}".strip()
    driver, step, response, kind = words
    est, low, high = row["estimate"], row.get("ci_low"), row.get("ci_high")
    if est is None:
        return f"How {response} follows {driver}{where}: not estimated."
    if kind == "pct":  # an elasticity: 10% more driver -> ~10 x elasticity % more response
        est, low, high = (None if v is None else 10 * v for v in (est, low, high))
    # one number of decimals for the estimate and its interval, enough for two significant digits
    # of the smallest: "0.008 higher PUE (95% interval 0.01 to 0.01)" said nothing of the interval
    digits = _decimals(est, low, high, least=1 if kind == "pct" else 3)
    unit = "%" if kind == "pct" else ""
    amount = f"{abs(est):.{digits}f}{unit}"
    direction = "higher" if est >= 0 else "lower"
    noun = f"{amount} {direction} {response}" if kind == "abs" else f"{amount} {'more' if est >= 0 else 'less'} {response}"
    if low is None or high is None:
        sure = " (no interval)"
    elif low <= 0 <= high:
        sure = f"; too uncertain to call (95% interval {low:+.{digits}f} to {high:+.{digits}f}{unit} includes no effect)"
    else:
        sure = f" (95% interval {low:.{digits}f} to {high:.{digits}f}{unit})"
    return f"{step} {driver}{where} goes with {noun}{sure}."


def _sensitivities(data: ReportData, figs: FigureWriter, s: Section) -> None:
    s.heading("Sensitivities")
    if not has(data.sensitivity, "quantity", "estimate"):
        s.missing(f"no sensitivities ({data.sensitivity_why or 'fct_sensitivity_daily has no estimates'})")
        return
    # S and its parts have their own block (section_sensitivity) with the typical values beside them.
    rows = data.sensitivity.filter(~pl.col("quantity").is_in(list(JOINT_PARTS))).sort("quantity", "scope")
    s.note("How energy and PUE move with what drives them, over the day's hours (other drivers held fixed):")
    s.bullets([sensitivity_sentence(r) for r in rows.iter_rows(named=True)])
    # The statistics behind the sentences, for whoever checks them: folded.
    labels = {"estimate": "estimate (see unit)", "ci_low": "95% CI low (see unit)", "ci_high": "95% CI high (see unit)"}
    stats = rows.with_columns(pl.col("method").replace(METHOD_WORDS)) if "method" in rows.columns else rows
    cols = [c for c in ("quantity", "scope", "estimate", "ci_low", "ci_high", "unit", "n_obs", "method") if c in stats.columns]
    fold = table(stats.select(cols).rename({c: labels[c] for c in cols if c in labels}),
                 digits={label: 4 for label in labels.values()}, source="fct_sensitivity_daily")
    if has(rows, "ci_low", "ci_high", "unit"):
        fold = fold + figs.div(sensitivity_forest(rows.filter(pl.col("estimate").is_not_null())))
    s.add(details("The statistics: elasticities (% change of the response per 1% change of the driver), 95% "
                  "intervals, observations and method", fold))


def _watts(low: float, high: float) -> str:
    return f"{fmt_number(low, 0)} W" if low == high else f"{fmt_number(low, 0)}-{fmt_number(high, 0)} W"


def interval_vs_caps(data: ReportData) -> list[str]:
    """Per GPU model and class given caps today: the caps, the class's 'mix' interval and each
    bottleneck's, so that caps matching no single bottleneck (GPUs that mix kinds of work) read
    as what they are, not as a contradiction of the table."""
    recs, rows = data.to_apply, data.interval
    needed = ("gpu_model", "workload_class", "power_limit_w", "default_limit_w")
    if not (has(recs, *needed) and has(rows, "workload_class", "bottleneck", "busy_share", "best_limit_w_low", "best_limit_w_high")):
        return []
    capped = recs.filter(pl.col("power_limit_w") < pl.col("default_limit_w"))
    if "locked_sm_clock_max_mhz" in capped.columns:
        capped = capped.filter(pl.col("locked_sm_clock_max_mhz").is_null())
    out = []
    for g in (capped.group_by("gpu_model", "workload_class")
              .agg(pl.len().alias("n"), pl.col("power_limit_w").min().alias("low"), pl.col("power_limit_w").max().alias("high"))
              .sort("gpu_model", "workload_class").iter_rows(named=True)):
        mine = rows.filter((pl.col("gpu_model") == g["gpu_model"]) & (pl.col("workload_class") == g["workload_class"]))
        mix = mine.filter(pl.col("bottleneck") == "mix")
        alone = [f"{r['bottleneck']} work ({fmt_number(100 * r['busy_share'], 0)}% of the model's busy time) "
                 f"{_watts(r['best_limit_w_low'], r['best_limit_w_high'])}"
                 for r in mine.filter(pl.col("bottleneck") != "mix").sort("busy_share", descending=True, nulls_last=True)
                 .iter_rows(named=True) if (r.get("busy_share") or 0) >= 0.05]
        together = (f"; its {g['workload_class']} GPUs together: {_watts(mix['best_limit_w_low'][0], mix['best_limit_w_high'][0])}"
                    if mix.height else "")
        out.append(f"{g['gpu_model']}, {g['workload_class']}: caps {_watts(g['low'], g['high'])} on {g['n']} GPU"
                   f"{'' if g['n'] == 1 else 's'}, each chosen on its own day's mix of work{together}"
                   + (f"; alone, {', '.join(alone)}." if alone else "."))
    return out


def _power_interval(data: ReportData, s: Section) -> None:
    s.heading("Best power interval per GPU model and bottleneck")
    if not has(data.interval, "gpu_model", "best_limit_w"):
        s.missing(f"no best power interval ({data.interval_why or 'fct_power_interval has no best_limit_w'})")
        return
    rows = data.interval.with_columns((pl.col("busy_share") * 100).alias("busy_share_pct")) if "busy_share" in data.interval.columns else data.interval
    cols = [c for c in ("gpu_model", "bottleneck", "workload_class", "max_slowdown_pct", "busy_share_pct", "best_limit_w", "best_limit_w_low", "best_limit_w_high",
                        "default_limit_w", "perf_per_watt_gain_pct", "slowdown_at_best_pct") if c in rows.columns]
    s.note("The least energy per unit of work within each workload class's slowdown bound, among the limits the "
           "recommender may set, from the fitted power and cap models: the rule the recommendations follow. "
           "Rows with bottleneck 'mix' score the class's GPUs of the model on their whole day together, as the recommender "
           "scores each GPU (caps follow those rows); the other rows say what each kind of work alone would call for. "
           "A bottleneck whose interval spans up to the default never reaches the cap: a clock range is what saves there.")
    s.bullets(interval_vs_caps(data))
    s.add(table(rows.select(cols).sort([c for c in ("gpu_model", "bottleneck", "workload_class") if c in cols]),
                digits={"busy_share_pct": 1, "perf_per_watt_gain_pct": 1, "slowdown_at_best_pct": 1, "best_limit_w": 0,
                        "best_limit_w_low": 0, "best_limit_w_high": 0, "default_limit_w": 0}, source="fct_power_interval"))


def _job_prediction(data: ReportData, figs: FigureWriter, s: Section) -> None:
    s.heading("Job energy predicted on another GPU model")
    rows = data.job_prediction
    if not has(rows, "predicted_energy_kwh", "measured_energy_kwh"):
        s.missing(f"no cross-model job prediction ({data.job_prediction_why or 'no measured pairs'})")
        return
    if has(rows, "error_pct"):
        err = rows["error_pct"].abs()
        s.note(f"{rows.height} predictions of a job's energy on a GPU model it did not run on, checked against the same job "
               f"run there: mean absolute error {fmt_number(float(err.mean()), 1)}%, worst {fmt_number(float(err.max()), 1)}%.")
    s.add(figs.div(job_prediction_error(rows)))
    cols = [c for c in ("job_id", "from_gpu_model", "to_gpu_model", "source_energy_kwh", "predicted_energy_kwh",
                        "measured_energy_kwh", "error_pct") if c in rows.columns]
    s.add(table(rows.select(cols).sort("job_id"), digits={"source_energy_kwh": 3, "predicted_energy_kwh": 3,
                                                          "measured_energy_kwh": 3}, max_rows=8,
                source="fct_job_energy_prediction"))


def models_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("models", "Power models")
    _fits(data, s)
    _residuals(data, figs, s)
    if data.curve is not None and data.curve.height:
        s.add(figs.div(figures.energy_vs_limit(data.curve)))
    else:
        s.missing(f"no power-limit curve ({data.curve_why or 'no rows for the day'}): energy-vs-limit curve not drawn")
    _thermal(data, figs, s)
    _sensitivities(data, figs, s)
    joint_sensitivity_block(data, figs, s)
    _power_interval(data, s)
    _job_prediction(data, figs, s)
    return s
