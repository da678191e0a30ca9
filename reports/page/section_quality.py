"""The report's "Data quality" section: check results (blocking / warning), quarantined readings
by reason, coverage and staleness per GPU, the share of server energy its GPUs do not explain
(node reconciliation), and PUE by hour."""

from __future__ import annotations

import polars as pl

from joulehouse.reports.page import figures
from joulehouse.reports.page.relations import ReportData, has
from joulehouse.reports.page.blocks import FigureWriter, Section, details, fmt_number, table

# A GPU is listed as a coverage problem below this share of the day, or when its last reading
# is older than this many seconds at the end of the day.
LOW_COVERAGE_RATIO = 0.95
STALE_AFTER_S = 300.0


def _observed(value: object) -> object:
    """Observed values arrive as text ('0.1891309111532365'): shorten long numbers for reading."""
    try:
        number = float(str(value))
    except ValueError:
        return value
    return fmt_number(number, 3) if "." in str(value) else value


def _checks(data: ReportData, s: Section) -> None:
    if data.checks is None:
        s.missing(f"no data checks ({data.checks_why}): data quality not verified")
        return
    checks = data.checks.with_columns((~pl.col("success").fill_null(False)).alias("failed"))
    if "observed_value" in checks.columns:
        checks = checks.with_columns(pl.col("observed_value").map_elements(_observed, return_dtype=pl.String))
    severity = pl.col("severity").fill_null("unstated") if "severity" in checks.columns else pl.lit("unstated")
    by = (checks.with_columns(severity.alias("severity_")).group_by("severity_")
          .agg(pl.len().alias("n"), pl.col("failed").sum().alias("failed")).sort("severity_"))
    ran = set(by["severity_"].to_list())
    # the warnings run in their own task (Great Expectations): one that failed stored nothing, and
    # the page said "Every check passed" over the blocking rules alone (review, helper-93)
    not_run = [f"{severity}: did not run (no results stored for the day)" for severity in ("blocking", "warning")
               if severity not in ran]
    s.note("Checks: " + "; ".join([f"{r['severity_']}: {r['n'] - r['failed']} of {r['n']} passed"
                                   for r in by.iter_rows(named=True)] + not_run)
           + ". A failed blocking check stops the day's pipeline; a failed warning is listed here.")
    cols = [c for c in ("suite", "expectation", "severity", "observed_value", "failed") if c in checks.columns]
    failed = checks.filter(pl.col("failed"))
    if failed.height:
        s.add(table(failed.select(cols).sort([c for c in ("severity", "suite", "expectation") if c in cols]), bad="failed",
                    source="fct_check_results"))
    elif not_run:
        s.note("", lead="Every check that ran passed; the " + " and the ".join(n.split(":")[0] for n in not_run)
               + " checks did not run.")
    else:
        s.note("", lead="Every check passed.")
    s.add(details(f"All {checks.height} checks", table(checks.select(cols).sort([c for c in ("suite", "expectation") if c in cols]),
                                                       bad="failed", max_rows=200)))


def _quarantine(data: ReportData, figs: FigureWriter, s: Section) -> None:
    if data.quarantine is None:
        s.note(f"Quarantine: {data.quarantine_why} (no readings set aside).")
        return
    total = int(data.quarantine["rows"].sum())
    s.note(f"{total:,} readings quarantined (set aside with a reason, not used for energy).")
    s.add(figs.div(figures.bar(data.quarantine["reason"].to_list(), data.quarantine["rows"].to_list(),
                               "Quarantined GPU readings by reason", "reason", "readings (count)")))


def _coverage(data: ReportData, figs: FigureWriter, s: Section) -> None:
    s.heading("Coverage and staleness per GPU")
    if has(data.coverage, "gpu_uuid", "coverage_ratio"):
        cov = data.coverage
    elif has(data.energy, "coverage_ratio"):
        s.note(f"Per-GPU coverage relation missing ({data.coverage_why}); coverage averaged from the hourly energy.")
        cov = data.energy.group_by("host", "gpu_uuid", "gpu_model").agg(pl.col("coverage_ratio").mean())
    else:
        s.missing("no coverage figures: neither fct_gpu_coverage_daily nor coverage_ratio in the hourly energy")
        return
    low = pl.col("coverage_ratio") < LOW_COVERAGE_RATIO
    stale = (pl.col("staleness_s") > STALE_AFTER_S) if "staleness_s" in cov.columns else pl.lit(False)
    problems = cov.filter(low | stale.fill_null(False))
    s.note(f"{cov.height} GPUs reported; {problems.height} below {LOW_COVERAGE_RATIO:.0%} of the day covered or silent for more "
           f"than {STALE_AFTER_S:.0f} s at the end of the day.")
    s.add(figs.div(figures.coverage_per_gpu(cov)))
    if problems.height:
        cols = [c for c in ("host", "gpu_uuid", "gpu_model", "in_inventory", "coverage_ratio", "n_gaps", "longest_gap_s",
                            "staleness_s", "last_sampled_at") if c in problems.columns]
        s.add(table(problems.select(cols).sort("coverage_ratio"), digits={"coverage_ratio": 3, "longest_gap_s": 0,
                                                                          "staleness_s": 0}, max_rows=10,
                    source="fct_gpu_coverage_daily"))


def _reconciliation(data: ReportData, figs: FigureWriter, s: Section) -> None:
    s.heading("Node reconciliation (BMC vs GPUs)")
    rec = data.reconciliation
    if not has(rec, "hour_at", "host", "residual_share"):
        s.missing(f"no node reconciliation ({data.reconciliation_why or 'no residual_share'}): "
                  "the share of server energy outside the GPUs is unknown")
        return
    per = rec.group_by("host").agg(pl.col("residual_kwh").sum() if "residual_kwh" in rec.columns else pl.lit(None),
                                   pl.col("node_energy_kwh").sum() if "node_energy_kwh" in rec.columns else pl.lit(None))
    if has(per, "residual_kwh", "node_energy_kwh"):
        share = 100 * float(per["residual_kwh"].sum()) / float(per["node_energy_kwh"].sum() or 1)
        s.note(f"Over the day, {fmt_number(share, 1)}% of the servers' BMC energy is not drawn by their GPUs "
               "(CPUs, memory, fans, PSU loss). A jump in one host's share points to a meter or a fan fault.")
    s.add(figs.div(figures.residual_share_by_hour(rec)))


def _pue(data: ReportData, figs: FigureWriter, s: Section) -> None:
    s.heading("PUE by hour")
    if not has(data.pue, "hour_at", "pue"):
        s.missing(f"no PUE ({data.pue_why or 'fct_pue_hourly has no pue values'}): facility overhead per hour unknown")
        return
    pue = data.pue if "site" in data.pue.columns else data.pue.with_columns(pl.lit("site").alias("site"))
    if "it_energy_kwh" not in pue.columns:
        pue = pue.with_columns(pl.lit(None, dtype=pl.Float64).alias("it_energy_kwh"))
    if has(pue, "facility_energy_kwh", "it_energy_kwh"):
        day_pue = float(pue["facility_energy_kwh"].sum()) / float(pue["it_energy_kwh"].sum() or 1)
        s.note(f"Day PUE {day_pue:.3f} (facility energy / IT energy); hourly range "
               f"{fmt_number(float(pue['pue'].min()), 3)}-{fmt_number(float(pue['pue'].max()), 3)}.")
    s.add(figs.div(figures.pue_by_hour(pue)))


def quality_section(data: ReportData, figs: FigureWriter) -> Section:
    s = Section("quality", "Data quality")
    _checks(data, s)
    _quarantine(data, figs, s)
    _coverage(data, figs, s)
    _reconciliation(data, figs, s)
    _pue(data, figs, s)
    return s
