"""What `joulehouse run` and `joulehouse demo` print about a day: its headline numbers (energy,
carbon, cost, checks, settings recommended) and, where settings took effect, what they saved,
on how many of their GPUs that was measured, and which GPU's setting broke its promise (the
daily report's sentences, reports.page.outcome_checks), as rich tables and sentences."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.markup import escape
from rich.table import Table

HEADLINE_SQL = {
    "gpus": "SELECT count(DISTINCT gpu_uuid) FROM fct_gpu_energy_hourly WHERE day = ?",
    "energy_kwh": "SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE day = ?",
    "carbon_kgco2e": "SELECT sum(total_gco2e) / 1000 FROM rpt_carbon_daily WHERE day = ?",
    "embodied_kgco2e": "SELECT sum(embodied_gco2e) / 1000 FROM rpt_carbon_daily WHERE day = ?",
    "cost_usd": "SELECT sum(total_cost_usd) FROM rpt_tco_daily WHERE day = ?",
    "energy_cost_usd": "SELECT sum(energy_cost_usd) FROM rpt_tco_daily WHERE day = ?",
    # a failed warning is reported and the run goes on: counted apart from the blocking failures
    "checks_failed": ("SELECT count(*) FILTER (WHERE NOT success AND severity = 'blocking') "
                      "FROM fct_check_results WHERE day = ?"),
    "checks_warned": ("SELECT count(*) FILTER (WHERE NOT success AND severity <> 'blocking') "
                      "FROM fct_check_results WHERE day = ?"),
}
OUTCOME_SQL = ("SELECT gpu_model, power_limit_w_before, power_limit_w_after, n_treated_gpus, predicted_saving_pct, "
               "realised_saving_pct, saving_ci_low_pct, saving_ci_high_pct FROM fct_recommendation_outcome "
               "WHERE day = ? AND scope = 'model_setting' ORDER BY ALL")


class DayOutcomes(NamedTuple):
    """What the day's outcome says: the pooled rows (OUTCOME_SQL's columns), the per-GPU rows with
    their class and bound (reports.page.outcome_checks.gpu_outcomes, None without), and the basis
    of the savings (reports.page.relations.saving_basis)."""
    pooled: list[tuple]
    gpus: object
    basis: str

    def __bool__(self) -> bool:
        return bool(self.pooled) or self.gpus is not None


def plural(n: int, word: str) -> str:
    """'1 GPU', '32 GPUs'."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def day_headline(db_path: str, lake: str, day: dt.date) -> tuple[dict, DayOutcomes]:
    """({quantity: value or None}, the day's outcomes) of `day` from the warehouse, read-only; a
    relation the day's run did not build gives None. numbers["cost_parts_usd"] holds the cost by
    component ({rpt_tco_daily column: USD or None}), empty where unknown."""
    import duckdb

    from joulehouse.reports.page.outcome_checks import gpu_outcomes
    from joulehouse.reports.page.relations import SQL, applied_setting_bounds, saving_basis
    from joulehouse.reports.warehouse_tables import read_day
    from joulehouse.warehouse.db import connect
    from joulehouse.warehouse.sqlio import relation_exists

    con = connect(db_path, lake, read_only=True)
    try:
        numbers = {}
        for name, sql in HEADLINE_SQL.items():
            relation = sql.split("FROM ")[1].split()[0]
            try:
                numbers[name] = con.execute(sql, [day]).fetchone()[0] if relation_exists(con, relation) else None
            except duckdb.BinderException:  # a relation an older version wrote, without the column: not computed
                numbers[name] = None
        try:
            numbers["cost_parts_usd"] = (SQL.records(con, "cost_parts_of_day", {"day": day})[0]
                                         if relation_exists(con, "rpt_tco_daily") else {})
        except duckdb.BinderException:  # an older rpt_tco_daily without the components: the label says less
            numbers["cost_parts_usd"] = {}
        numbers["gpus_to_cap"] = _gpus_to_cap(con, day) if relation_exists(con, "fct_recommendation") else None
        outcomes = DayOutcomes([], None, "")
        if relation_exists(con, "fct_recommendation_outcome"):
            rows, _ = read_day(con, "fct_recommendation_outcome", day)
            gpus = gpu_outcomes(rows, applied_setting_bounds(con, day)) if rows is not None and rows.height else None
            outcomes = DayOutcomes(con.execute(OUTCOME_SQL, [day]).fetchall(), gpus,
                                   saving_basis(rows) if rows is not None else "")
    finally:
        con.close()
    return numbers, outcomes


def _gpus_to_cap(con, day: dt.date) -> int:
    """The GPUs the day's signed export gives a lower power limit, by the export's own rule
    (reports.export.selection): counted from fct_recommendation alone, the GPUs of a model whose
    power model failed its gate were printed as capped (12 where the export and the page said 8)."""
    import polars as pl

    from joulehouse.reports.export.selection import CHANGE, export_verdicts, held_back_models
    from joulehouse.reports.page.relations import usable
    from joulehouse.reports.warehouse_tables import read_day

    recs, _ = usable(*read_day(con, "fct_recommendation", day), "fct_recommendation", day)
    if recs is None or not {"power_limit_w", "default_limit_w"} <= set(recs.columns):
        return 0
    models, models_why = usable(*read_day(con, "fct_power_model", day), "fct_power_model", day)
    verdicts = export_verdicts(recs, held_back_models(recs, models, models_why, day))
    return verdicts.filter((pl.col("export") == CHANGE) & (pl.col("power_limit_w") < pl.col("default_limit_w"))).height


def _or_not_computed(value, text: str) -> str:
    return "not computed" if value is None else text


def headline_table(day: dt.date, numbers: dict, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column(f"{day}")
    table.add_column("value", justify="right")
    energy, cost, energy_cost = numbers["energy_kwh"], numbers["cost_usd"], numbers["energy_cost_usd"]
    # the page's formats (reports.page.blocks), so the terminal and the page say the same: a fixed
    # one decimal printed 1.1 Wh as "0.0 kWh" and 3.5e-5 USD as "0.00 USD"
    from joulehouse.reports.page.blocks import fmt_kg, fmt_kwh, fmt_usd
    from joulehouse.reports.page.section_summary import cost_label

    table.add_row(f"GPU energy ({plural(numbers['gpus'] or 0, 'GPU')}, board)",
                  _or_not_computed(energy, fmt_kwh(energy)))
    # the daily report's and the dashboard's label for the same total (reports.page.section_summary)
    carbon, embodied = numbers["carbon_kgco2e"], numbers.get("embodied_kgco2e")
    table.add_row("carbon, location-based (operational + embodied)",
                  _or_not_computed(carbon, fmt_kg(carbon * 1000 if carbon is not None else None)))
    if carbon is not None and embodied is not None:
        table.add_row("  of which embodied (manufacturing)", fmt_kg(embodied * 1000))
    table.add_row(cost_label(numbers.get("cost_parts_usd") or {}), _or_not_computed(cost, fmt_usd(cost)))
    table.add_row("  of which energy", _or_not_computed(energy_cost, fmt_usd(energy_cost)))
    table.add_row("data checks failed (blocking)",
                  _or_not_computed(numbers["checks_failed"], f"{numbers['checks_failed'] or 0}"))
    table.add_row("data checks warned (the run goes on)",
                  _or_not_computed(numbers["checks_warned"], f"{numbers['checks_warned'] or 0}"))
    table.add_row("GPUs recommended a lower power limit", _or_not_computed(numbers.get("gpus_to_cap"), f"{numbers.get('gpus_to_cap') or 0}"))
    return table


def outcome_table(outcomes: list[tuple], basis: str = "energy per unit of work") -> Table:
    table = Table(title=f"What the applied settings saved ({basis or 'energy per unit of work'}, against GPUs that "
                        "kept theirs)", title_justify="left")
    for col, justify in (("GPU model", "left"), ("power limit", "left"), ("GPUs", "right"), ("predicted", "right"),
                         ("realised [95% interval]", "right")):
        table.add_column(col, justify=justify)
    for model, before_w, after_w, n, predicted, realised, low, high in outcomes:
        interval = f" [{low:.1f} to {high:.1f}]" if low is not None and high is not None else ""
        table.add_row(escape(str(model)), f"{before_w:.0f} -> {after_w:.0f} W", str(n),
                      "-" if predicted is None else f"{predicted:.1f}%",
                      "-" if realised is None else f"{realised:.1f}%{interval}")
    return table


def print_outcomes(console: Console, outcomes: DayOutcomes) -> None:
    """The pooled savings' table, on how many GPUs they were measured, and each broken promise."""
    from joulehouse.reports.page.outcome_checks import broken_promises, coverage_sentence

    if outcomes.pooled:
        console.print(outcome_table(outcomes.pooled, outcomes.basis))
    coverage = coverage_sentence(outcomes.gpus)
    if coverage:
        console.print(escape(coverage))
    for promise in broken_promises(outcomes.gpus):
        console.print("[yellow]check this setting:[/yellow]", escape(promise))


def print_day(console: Console, db_path: str, lake: str, day: dt.date, report: Path, title: str) -> None:
    """The day's headline table, what applied settings saved (if any), and where its report is."""
    numbers, outcomes = day_headline(db_path, lake, day)
    console.print(headline_table(day, numbers, title))
    if outcomes:
        print_outcomes(console, outcomes)
    console.print(f"report: {escape(str(report))}")
