"""The report's "Recommendations" and "Efficiency" sections: the settings to apply (caps and clock
locks), consolidation and thermal placement, what the last recommendations really saved
(realised vs predicted, 95% CI), and energy per unit of work per GPU model and power limit."""

from __future__ import annotations

import polars as pl

from joulehouse.reports.export.selection import AT_DEFAULT
from joulehouse.reports.page.figures_estimates import efficiency_by_setting, outcome_label, outcome_saving, whole_text
from joulehouse.reports.page.outcome_checks import broken_promises, coverage_sentence
from joulehouse.reports.page.relations import ReportData, has, saving_basis, total
from joulehouse.reports.page.blocks import FigureWriter, Section, details, fmt_number, plural, table

REC_COLUMNS = ("host", "gpu_uuid", "gpu_model", "workload_class", "power_limit_w", "default_limit_w",
               "locked_sm_clock_min_mhz", "locked_sm_clock_max_mhz", "expected_saving_pct", "saving_kwh_per_day",
               "expected_slowdown_pct", "reason")
REC_DIGITS = {"power_limit_w": 0, "default_limit_w": 0, "locked_sm_clock_min_mhz": 0, "locked_sm_clock_max_mhz": 0,
              "expected_saving_pct": 1, "expected_slowdown_pct": 1}


def setting_text(recs: pl.DataFrame) -> pl.Expr:
    """'cap at 300 W (default 700 W)' or 'lock SM clocks at 900-1584 MHz', one string per row."""
    def num(col: str) -> pl.Expr:
        return whole_text(col, missing=None) if col in recs.columns else pl.lit(None, pl.String)

    clock = pl.when(pl.col("locked_sm_clock_min_mhz").is_not_null() if "locked_sm_clock_min_mhz" in recs.columns else pl.lit(False)) \
        .then("lock SM clocks at " + num("locked_sm_clock_min_mhz") + "-" + num("locked_sm_clock_max_mhz") + " MHz") \
        .otherwise("lock SM clocks at or below " + num("locked_sm_clock_max_mhz") + " MHz")
    cap = "cap at " + num("power_limit_w") + " W (default " + num("default_limit_w") + " W)"
    capped = (pl.col("power_limit_w") < pl.col("default_limit_w")).fill_null(False) if "default_limit_w" in recs.columns else pl.lit(True)
    has_clock = pl.col("locked_sm_clock_max_mhz").is_not_null() if "locked_sm_clock_max_mhz" in recs.columns else pl.lit(False)
    return (pl.when(capped & has_clock).then(pl.concat_str([cap, clock], separator=" and "))
            .when(has_clock).then(clock).otherwise(pl.coalesce(cap, pl.lit("apply as listed"))))


def _grouped(rows: pl.DataFrame, why: pl.Expr) -> list[str]:
    """'N GPUs: why' per distinct `why`, most GPUs first; the part of a reason in parentheses (each
    GPU's busy hours) is dropped so that alike reasons group."""
    groups = (rows.with_columns(why.str.replace(r"\s*\([^)]*\)", "").alias("why"))
              .group_by("why").agg(pl.len().alias("gpus")).sort("gpus", "why", descending=[True, False]))
    return [f"{r['gpus']} GPU{'' if r['gpus'] == 1 else 's'}: {r['why']}" for r in groups.iter_rows(named=True)]


def _settings(data: ReportData, s: Section) -> None:
    if data.recs is None:
        s.missing(f"no recommendations ({data.recs_why})")
        return
    # Counted by the export's own rule (reports.export.selection.export_verdicts): these numbers
    # are the settings recommended-config.json carries and `joulehouse agent verify` counts.
    verdicts, changing = data.exported, data.to_apply
    at_default = verdicts.filter(pl.col("export") == AT_DEFAULT)
    left_out = verdicts.filter(pl.col("export").is_null())
    s.heading(f"Settings in the signed export ({changing.height + at_default.height} of {data.recs.height} GPUs)")
    if changing.height:
        s.note(f"{changing.height} of them change a GPU (a cap below its default limit, or locked SM clocks):")
        shown = changing.with_columns(setting_text(changing).alias("setting"))
        cols = [c for c in ("host", "gpu_uuid", "gpu_model", "workload_class", "setting", "saving_kwh_per_day",
                            "expected_slowdown_pct", "reason") if c in shown.columns]
        s.add(table(shown.select(cols).sort("saving_kwh_per_day", "host", descending=[True, False], nulls_last=True),
                    digits=REC_DIGITS, source="fct_recommendation"))
    else:
        s.note(f"No GPU gets a new setting today ({data.recs.height} GPUs considered).")
    reason = pl.col("reason").fill_null("no reason given") if "reason" in verdicts.columns else pl.lit("no reason given")
    if at_default.height:
        s.note(f"{at_default.height} {'is' if at_default.height == 1 else 'are'} set to the device default limit, "
               "clocks unlocked: listed in the file so that each node agent applies and audits them ('unchanged' "
               "where the GPU is already there):")
        s.bullets(_grouped(at_default, reason))
    if left_out.height:
        held = pl.col("gpu_model").is_in(list(data.held_back)) if "gpu_model" in left_out.columns else pl.lit(False)
        no_limit = pl.col("power_limit_w").is_null() if "power_limit_w" in left_out.columns else pl.lit(True)
        why = (pl.when(held).then(pl.lit("held back from the export: ") + pl.col("left_out"))
               .when(no_limit & reason.ne("no reason given")).then(reason).otherwise(pl.col("left_out")))
        s.note(f"{left_out.height} {'GPU gets' if left_out.height == 1 else 'GPUs get'} no setting in the export "
               "(a node agent returns any it set before to the default):")
        s.bullets(_grouped(left_out, why))
    cols = [c for c in REC_COLUMNS if c in data.recs.columns and c != "saving_kwh_per_day"]
    every = verdicts.with_columns(pl.col("export").replace({AT_DEFAULT: "default limit"}).fill_null("left out")
                                  .alias("in_export"))
    s.add(details(f"Every GPU's recommendation ({data.recs.height})",
                  table(every.select(cols[:2] + ["in_export"] + cols[2:]).sort(cols[:2]), digits=REC_DIGITS,
                        max_rows=500)))
    held_back = data.held_back
    if held_back:
        s.heading("GPU models left out of the export")
        s.add(table(pl.DataFrame({"gpu_model": list(held_back), "reason": list(held_back.values())})))
    elif has(data.models, "passed_gate"):
        s.note("Every GPU model's power model passed its gate: none left out of the export.")


def _placement(data: ReportData, s: Section) -> None:
    s.heading("Consolidation and thermal placement")
    if data.placement is None:
        s.missing(f"no consolidation or placement advice ({data.placement_why})")
        return
    rows = data.placement
    if has(rows, "kind", "expected_saving_kwh_per_day"):
        per = rows.group_by("kind").agg(pl.len().alias("n"), pl.col("expected_saving_kwh_per_day").sum()).sort("kind")
        s.note("; ".join(f"{r['kind'].replace('_', ' ')}: {r['n']} GPUs, about "
                         f"{fmt_number(r['expected_saving_kwh_per_day'], 2)} kWh/day" for r in per.iter_rows(named=True)))
    cols = [c for c in ("kind", "host", "gpu_uuid", "expected_saving_kwh_per_day", "detail") if c in rows.columns]
    order = [c for c in ("expected_saving_kwh_per_day", "host") if c in cols]
    s.add(table(rows.select(cols).sort(order, descending=[True, False][: len(order)], nulls_last=True),
                digits={"expected_saving_kwh_per_day": 3}, max_rows=6, source="fct_recommendation_extra"))


def _outcome(data: ReportData, figs: FigureWriter, s: Section) -> None:
    s.heading("What the last recommendations saved")
    if data.outcome is None:
        if data.outcome_exists:
            s.note(f": no GPU's power limit changed in the days up to {data.day} ({data.outcome_why}), so there is no "
                   "realised saving to show. It appears here once the node agents apply a recommended config and a few "
                   "days run under it.", lead="No recommendation has taken effect yet")
        else:
            s.missing(f"realised savings not measured ({data.outcome_why})")
        return
    rows = data.outcome
    if not has(rows, "realised_saving_pct"):
        s.missing("fct_recommendation_outcome has no realised_saving_pct values: realised savings not measured")
        return
    pooled = rows.filter(pl.col("scope") != "gpu") if "scope" in rows.columns else rows
    methods = sorted(rows["method"].drop_nulls().unique().to_list()) if "method" in rows.columns else []
    s.note(f"{saving_basis(rows).capitalize()} before vs after each setting took effect, against same-model GPUs that kept theirs "
           "(difference in differences); bars are 95% confidence intervals, diamonds the saving predicted"
           + (f". Method: {', '.join(methods)}" if methods else "") + ".")
    if has(pooled, "realised_saving_pct", "predicted_saving_pct"):
        for r in pooled.iter_rows(named=True):
            ci = (f" (95% CI {fmt_number(r.get('saving_ci_low_pct'), 1)} to {fmt_number(r.get('saving_ci_high_pct'), 1)}%)"
                  if r.get("saving_ci_low_pct") is not None else " (no interval: too few control GPUs)")
            s.note(f"{r['gpu_model']}, {fmt_number(r.get('power_limit_w_before'), 0)} → {fmt_number(r.get('power_limit_w_after'), 0)} W: "
                   f"realised {fmt_number(r['realised_saving_pct'], 1)}%{ci}, "
                   + (f"predicted {fmt_number(r['predicted_saving_pct'], 1)}%." if r["predicted_saving_pct"] is not None
                      else "no prediction (no recommendation gave this limit)."))
    coverage = coverage_sentence(data.outcome_gpus)
    if coverage:
        s.note(coverage)
    promises = broken_promises(data.outcome_gpus)
    if promises:
        s.warn(f"{plural(len(promises), 'setting')} to check: a realised slowdown beyond its workload class's bound "
               "([recommend] max_slowdown_*_pct, as the recommendation was made) that the work that ran does not "
               "need, or a realised 95% interval that leaves out the saving predicted on the work that ran (where "
               "it could be re-predicted; else the recommendation's):")
        s.bullets(promises)
    needed = ("scope", "host", "gpu_uuid", "gpu_model", "power_limit_w_before", "power_limit_w_after", "n_treated_gpus",
              "saving_ci_low_pct", "saving_ci_high_pct")
    if all(c in rows.columns for c in needed):
        s.add(figs.div(outcome_saving(rows)))
        shown = rows.with_columns(outcome_label(rows).alias("recommendation"), (pl.col("scope") == "gpu").alias("per_gpu"))
    else:
        shown = rows.with_columns(pl.lit(False).alias("per_gpu"))
    cols = [c for c in ("recommendation", "method", "outcome_unit", "n_control_gpus", "realised_saving_pct", "saving_ci_low_pct",
                        "saving_ci_high_pct", "predicted_saving_pct", "predicted_on_mix_saving_pct", "realised_slowdown_pct",
                        "predicted_slowdown_pct", "predicted_on_mix_slowdown_pct", "note")
            if c in shown.columns]
    s.add(table(shown.sort("per_gpu").select(cols), digits={c: 1 for c in cols if c.endswith("_pct")}, max_rows=12,
                source="fct_recommendation_outcome"))


def recommendations_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("recommendations", "Recommendations")
    _settings(data, s)
    _placement(data, s)
    _outcome(data, figs, s)
    return s


def efficiency_by_model_and_limit(jobs: pl.DataFrame) -> pl.DataFrame:
    """Ratios of sums per GPU model and power limit from per-job rows (fct_job_efficiency), each
    ratio over the jobs that report that work; jobs whose limit changed mid-run are left out."""
    if "power_limit_changed" in jobs.columns:
        jobs = jobs.filter(~pl.col("power_limit_changed").fill_null(False))
    jobs = jobs.filter(pl.col("energy_kwh").is_not_null())

    def energy_where(col: str) -> pl.Expr:
        return pl.col("energy_kwh").filter(pl.col(col).is_not_null()).sum() if col in jobs.columns else pl.lit(None)

    def work(col: str) -> pl.Expr:
        """The work of the part of the runs their energy was measured over (as fct_job_efficiency's
        own ratios): the whole run's work made a job a collector missed look more efficient."""
        if col not in jobs.columns:
            return pl.lit(None, dtype=pl.Float64)
        if {"measured_hours", "busy_hours"} <= set(jobs.columns):
            return (pl.col(col) * pl.col("measured_hours") / pl.col("busy_hours")).sum()
        return pl.col(col).sum()

    return (jobs.group_by("gpu_model", "power_limit_w")
            .agg(pl.col("job_id").n_unique().alias("n_jobs"), pl.col("gpu_uuid").n_unique().alias("n_gpus"),
                 pl.col("energy_kwh").sum(), (work("requests_total") / energy_where("requests_total")).alias("requests_per_kwh"),
                 (energy_where("tokens_total") * 3.6e6 / work("tokens_total")).alias("j_per_token"),
                 (energy_where("samples_total") * 3.6e6 / work("samples_total")).alias("j_per_sample"),
                 (work("flops_total") / (energy_where("flops_total") * 3.6e6)).alias("flops_per_w"))
            .with_columns([pl.when(pl.col(c).is_finite()).then(pl.col(c)).alias(c)
                           for c in ("requests_per_kwh", "j_per_token", "j_per_sample", "flops_per_w")])
            .sort("gpu_model", "power_limit_w"))


def efficiency_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("efficiency", "Efficiency")
    if has(data.job_efficiency, "gpu_model", "power_limit_w", "energy_kwh"):
        per = efficiency_by_model_and_limit(data.job_efficiency)
        source = "fct_job_efficiency"
    elif has(data.setting_efficiency, "gpu_model", "power_limit_w"):
        per = data.setting_efficiency
        source = "fct_efficiency_setting_daily"
    else:
        s.missing(f"no energy per unit of work ({data.job_efficiency_why or data.setting_efficiency_why}): EPOE, J/token, "
                  "J/sample and FLOPs/W not computed")
        return s
    metric_cols = [c for c in ("requests_per_kwh", "j_per_token", "j_per_sample", "flops_per_w") if has(per, c)]
    if not metric_cols:
        s.missing("no job reports work done (requests, tokens, samples or FLOPs): energy per unit of work not computed")
        return s
    jobs_kwh = total(per, "energy_kwh")
    s.note(f"Energy per unit of work of the day's jobs ({fmt_number(jobs_kwh, 1)} kWh in jobs), per GPU model and the power "
           "limit in force, ratios of sums over the jobs that report that work. EPOE = requests per kWh.")
    s.add(figs.div(efficiency_by_setting(per)))
    cols = [c for c in ("gpu_model", "power_limit_w", "stage", "workload_class", "n_jobs", "energy_kwh", *metric_cols)
            if c in per.columns]
    s.add(table(per.select(cols), digits={"power_limit_w": 0, "requests_per_kwh": 0, "j_per_token": 3, "j_per_sample": 3},
                source=source))
    if source == "fct_job_efficiency" and has(data.setting_efficiency, "gpu_model"):
        scols = [c for c in ("gpu_model", "power_limit_w", "stage", "workload_class", "n_jobs", "energy_kwh", *metric_cols)
                 if c in data.setting_efficiency.columns]
        s.add(details(f"By stage and workload class ({data.setting_efficiency.height} rows)",
                      table(data.setting_efficiency.select(scols).sort(scols[:4]), max_rows=100,
                            digits={"power_limit_w": 0, "requests_per_kwh": 0, "j_per_token": 3, "j_per_sample": 3})))
    return s
