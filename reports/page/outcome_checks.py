"""What the daily report and the terminal say about the settings that took effect, beside their
pooled savings: on how many of those GPUs the saving was measured (and why not on the others),
and which measured GPU broke the recommendation's promise: a realised slowdown beyond its
workload class's bound ([recommend] max_slowdown_*_pct), or a prediction outside the realised 95%
interval. The pooled table alone said neither: 4 of 21 capped GPUs measured, and an H200 of the
throughput class (bound 10%) slowed 10.9% where 2.9% was predicted, with no word."""

from __future__ import annotations

import polars as pl

from joulehouse.reports.page.blocks import plural


def gpu_outcomes(outcome: pl.DataFrame | None, bounds: pl.DataFrame | None) -> pl.DataFrame | None:
    """The per-GPU outcome rows (scope 'gpu'), with workload_class and max_slowdown_pct from
    `bounds` (relations.applied_setting_bounds; NULL where unknown); None without any."""
    if outcome is None or "scope" not in outcome.columns:
        return None
    gpus = outcome.filter(pl.col("scope") == "gpu")
    if gpus.height == 0:
        return None
    gpus = gpus.drop([c for c in ("workload_class", "max_slowdown_pct") if c in gpus.columns])
    if bounds is None or bounds.height == 0:
        return gpus.with_columns(pl.lit(None, pl.String).alias("workload_class"),
                                 pl.lit(None, pl.Float64).alias("max_slowdown_pct"))
    return gpus.join(bounds.select("gpu_uuid", "effective_day", "workload_class", "max_slowdown_pct"),
                     on=["gpu_uuid", "effective_day"], how="left")


def coverage_sentence(gpus: pl.DataFrame | None) -> str:
    """'Measured on 4 of 21 GPUs whose setting took effect; not measured: 11 GPUs (NVIDIA H100 80GB
    HBM3): <note>; ...', or '' without per-GPU rows."""
    if gpus is None or gpus.height == 0 or "realised_saving_pct" not in gpus.columns:
        return ""
    measured = gpus.filter(pl.col("realised_saving_pct").is_not_null())
    text = f"Measured on {measured.height} of {plural(gpus.height, 'GPU')} whose setting took effect"
    unmeasured = gpus.filter(pl.col("realised_saving_pct").is_null())
    if unmeasured.height == 0:
        return text + "."
    note = pl.col("note").fill_null("no reason recorded") if "note" in gpus.columns else pl.lit("no reason recorded")
    groups = (unmeasured.with_columns(note.alias("why"))
              .group_by("why").agg(pl.len().alias("n"), pl.col("gpu_model").unique().sort())
              .sort("n", "why", descending=[True, False]))
    parts = [f"{plural(g['n'], 'GPU')} ({', '.join(g['gpu_model'])}): {g['why']}" for g in groups.iter_rows(named=True)]
    return f"{text}; not measured: " + "; ".join(parts) + "."


def _pct(value: float) -> str:
    return f"{value:.1f}%"


def broken_promises(gpus: pl.DataFrame | None) -> list[str]:
    """One sentence per measured GPU whose realised slowdown exceeds its class's bound or whose
    predicted saving lies outside the realised 95% interval (or both), in host, GPU order."""
    if gpus is None:
        return []
    found = []
    for r in gpus.sort("host", "gpu_uuid", nulls_last=True).iter_rows(named=True):
        problems = []
        slowdown, bound = r.get("realised_slowdown_pct"), r.get("max_slowdown_pct")
        if slowdown is not None and bound is not None and slowdown > bound:
            predicted = r.get("predicted_slowdown_pct")
            problems.append(f"slowed {_pct(slowdown)}, beyond the {r['workload_class']} class's bound of {bound:g}%"
                            + (f" ({_pct(predicted)} predicted)" if predicted is not None else ""))
        saving, low, high = r.get("realised_saving_pct"), r.get("saving_ci_low_pct"), r.get("saving_ci_high_pct")
        predicted = r.get("predicted_saving_pct")
        if None not in (saving, low, high, predicted) and not low <= predicted <= high:
            problems.append(f"saved {_pct(saving)} (95% interval {low:.1f} to {high:.1f}%) where {_pct(predicted)} "
                            "was predicted, outside the interval")
        if problems:
            what = ", ".join(str(v) for v in (r.get("gpu_model"), r.get("workload_class")) if v)
            limits = f"{r['power_limit_w_before']:.0f} -> {r['power_limit_w_after']:.0f} W"
            found.append(f"{r.get('host') or ''} {r['gpu_uuid']} ({what}, {limits}): {'; '.join(problems)}".strip())
    return found
