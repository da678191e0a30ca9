"""What the daily report and the terminal say about the settings that took effect, beside their
pooled savings: on how many of those GPUs the saving was measured (and why not on the others),
which measured GPU broke the recommendation's promise (a realised slowdown beyond its workload
class's bound, [recommend] max_slowdown_*_pct, or a prediction outside the realised 95% interval),
and on which the work changed instead. The pooled table alone said neither: 4 of 21 capped GPUs
measured, and an H200 of the throughput class (bound 10%) slowed 10.9% where 2.9% was predicted,
with no word.

A recommendation's prediction is of its own day's work; the outcome measures the days after. Each
GPU row also carries the setting re-predicted on the work that ran (predicted_on_mix_*_pct,
models.outcome_reprediction). Where that is known it decides: a realised saving outside the
interval of the re-prediction, or a slowdown beyond the bound where the re-prediction stays within
it, is the model's miss; a realised figure the re-prediction matches and the original did not is
the work that changed (the demo's H200 at 350 W: 11.4% / 1.4% predicted on 06-11's work, 24.6% /
10.0% on 06-12's, 25.9% [23.9, 27.8] / 10.9% realised), said beside the coverage, not as a broken
promise."""

from __future__ import annotations

import polars as pl

from joulehouse.reports.page.blocks import plural


def gpu_outcomes(outcome: pl.DataFrame | None, bounds: pl.DataFrame | None) -> pl.DataFrame | None:
    """The per-GPU outcome rows (scope 'gpu'), with workload_class, max_slowdown_pct and
    recommended_day from `bounds` (relations.applied_setting_bounds; NULL where unknown); None
    without any."""
    if outcome is None or "scope" not in outcome.columns:
        return None
    gpus = outcome.filter(pl.col("scope") == "gpu")
    if gpus.height == 0:
        return None
    gpus = gpus.drop([c for c in ("workload_class", "max_slowdown_pct", "recommended_day") if c in gpus.columns])
    if bounds is None or bounds.height == 0:
        return gpus.with_columns(pl.lit(None, pl.String).alias("workload_class"),
                                 pl.lit(None, pl.Float64).alias("max_slowdown_pct"),
                                 pl.lit(None, pl.Date).alias("recommended_day"))
    if "recommended_day" not in bounds.columns:
        bounds = bounds.with_columns(pl.lit(None, pl.Date).alias("recommended_day"))
    return gpus.join(bounds.select("gpu_uuid", "effective_day", "workload_class", "max_slowdown_pct", "recommended_day"),
                     on=["gpu_uuid", "effective_day"], how="left")


def coverage_sentence(gpus: pl.DataFrame | None) -> str:
    """'Measured on 4 of 21 GPUs whose setting took effect; not measured: 11 GPUs (NVIDIA H100 80GB
    HBM3): <note>; ...', then which measured GPUs' work changed after the recommendation
    (work_changed), or '' without per-GPU rows."""
    if gpus is None or gpus.height == 0 or "realised_saving_pct" not in gpus.columns:
        return ""
    measured = gpus.filter(pl.col("realised_saving_pct").is_not_null())
    text = f"Measured on {measured.height} of {plural(gpus.height, 'GPU')} whose setting took effect"
    changed = work_changed(gpus)
    if changed:
        changed_text = (f" The work changed after the recommendation on {plural(len(changed), 'GPU')}, whose realised "
                        "figures are what the recommender predicts on the work that ran (not a broken promise): "
                        + "; ".join(changed) + ".")
    else:
        changed_text = ""
    unmeasured = gpus.filter(pl.col("realised_saving_pct").is_null())
    if unmeasured.height == 0:
        return text + "." + changed_text
    note = pl.col("note").fill_null("no reason recorded") if "note" in gpus.columns else pl.lit("no reason recorded")
    groups = (unmeasured.with_columns(note.alias("why"))
              .group_by("why").agg(pl.len().alias("n"), pl.col("gpu_model").unique().sort())
              .sort("n", "why", descending=[True, False]))
    parts = [f"{plural(g['n'], 'GPU')} ({', '.join(g['gpu_model'])}): {g['why']}" for g in groups.iter_rows(named=True)]
    return f"{text}; not measured: " + "; ".join(parts) + "." + changed_text


def _pct(value: float) -> str:
    return f"{value:.1f}%"


def _pct_beyond(value: float, bound: float) -> str:
    """A slowdown just beyond its bound with the digits that show it (10.01%, not 10.0% beyond 10%)."""
    return f"{value:.2f}%" if value > bound and round(value, 1) <= bound else _pct(value)


def _verdicts(r: dict) -> dict[str, list[str]]:
    """{'missed': the model's misses, 'changed': what the changed work explains} of one measured GPU
    row, each a list of clauses. The re-prediction on the work that ran (predicted_on_mix_*) decides where known; without
    it, the recommendation's own prediction is all there is to hold the realised figures to."""
    missed, changed = [], []
    on_day = f"on {r['recommended_day']}'s work" if r.get("recommended_day") else "on the recommendation day's work"
    slowdown, bound = r.get("realised_slowdown_pct"), r.get("max_slowdown_pct")
    predicted, on_mix = r.get("predicted_slowdown_pct"), r.get("predicted_on_mix_slowdown_pct")
    if slowdown is not None and bound is not None and slowdown > bound:
        beyond = f"slowed {_pct(slowdown)}, beyond the {r['workload_class']} class's bound of {bound:g}%"
        if on_mix is not None and on_mix > bound:
            changed.append(f"{beyond}, as the work that ran needs ({_pct_beyond(on_mix, bound)} predicted on it"
                           + (f", {_pct(predicted)} {on_day})" if predicted is not None else ")"))
        elif on_mix is not None:
            missed.append(f"{beyond} ({_pct(on_mix)} predicted on the work that ran"
                          + (f", {_pct(predicted)} {on_day})" if predicted is not None else ")"))
        else:
            missed.append(beyond + (f" ({_pct(predicted)} predicted)" if predicted is not None else ""))
    saving, low, high = r.get("realised_saving_pct"), r.get("saving_ci_low_pct"), r.get("saving_ci_high_pct")
    predicted, on_mix = r.get("predicted_saving_pct"), r.get("predicted_on_mix_saving_pct")
    if None in (saving, low, high):
        return {"missed": missed, "changed": changed}
    realised = f"saved {_pct(saving)} (95% interval {low:.1f} to {high:.1f}%)"
    if on_mix is not None and not low <= on_mix <= high:
        missed.append(f"{realised} where {_pct(on_mix)} is predicted on the work that ran"
                      + (f" ({_pct(predicted)} {on_day})" if predicted is not None else "") + ", outside the interval")
    elif on_mix is not None and predicted is not None and not low <= predicted <= high:
        changed.append(f"{realised} where {_pct(predicted)} was predicted {on_day} and {_pct(on_mix)} is on the work "
                       "that ran")
    elif on_mix is None and predicted is not None and not low <= predicted <= high:
        missed.append(f"{realised} where {_pct(predicted)} was predicted, outside the interval")
    return {"missed": missed, "changed": changed}


def _sentences(gpus: pl.DataFrame | None, verdict: str) -> list[str]:
    """One sentence per measured GPU with clauses of _verdicts' `verdict`, in host, GPU order."""
    if gpus is None:
        return []
    found = []
    for r in gpus.sort("host", "gpu_uuid", nulls_last=True).iter_rows(named=True):
        clauses = _verdicts(r)[verdict]
        if clauses:
            what = ", ".join(str(v) for v in (r.get("gpu_model"), r.get("workload_class")) if v)
            limits = f"{r['power_limit_w_before']:.0f} -> {r['power_limit_w_after']:.0f} W"
            found.append(f"{r.get('host') or ''} {r['gpu_uuid']} ({what}, {limits}): {'; '.join(clauses)}".strip())
    return found


def broken_promises(gpus: pl.DataFrame | None) -> list[str]:
    """One sentence per measured GPU the model missed on (module docstring): a realised slowdown
    beyond its class's bound that the work that ran does not need, or a realised saving whose 95%
    interval leaves out the re-prediction on the work that ran (without one, the recommendation's
    prediction); in host, GPU order."""
    return _sentences(gpus, "missed")


def work_changed(gpus: pl.DataFrame | None) -> list[str]:
    """One sentence per measured GPU whose realised figures the work that ran explains (module
    docstring): a saving outside the recommendation's prediction but matching the re-prediction, or
    a slowdown beyond the bound the re-prediction is beyond too; in host, GPU order."""
    return _sentences(gpus, "changed")
