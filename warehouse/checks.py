"""The warning data checks of a built day, with Great Expectations 1.x, results kept in
fct_check_results.

The blocking rules (a failure means the day's numbers are wrong: the run stops) are SQL in the
build's gate (warehouse.gate), which never waits for GX. The rules here are warnings (reported,
the run goes on), and GX validates them every day in a task of its own, off the critical path,
over small pandas frames that DuckDB computes from warehouse/checks_sql/*.sql (one file per frame,
`$day` bound): the day's summaries, not its readings:
- relations that are already small (one row per GPU-hour, GPU-day, host-hour, site-hour or GPU)
  are validated row by row, with the rule itself;
- stg_gpu_samples (one row per reading: millions a day) is first counted in DuckDB, one row of
  unexpected counts per rule, and GX checks each count (e.g. at most 1% of rows with power_w NULL);
- quarantine_gpu_samples is counted the same way.
So memory does not grow with the day's readings, and each rule keeps its meaning: the row-level
rule is what fct_check_results names, the expectation GX ran on the frame is in `details`.
GX's SQLAlchemy path with duckdb-engine silently returns empty results, hence pandas frames.
GX is imported inside validate_day (about 3 s); importing this module does not import it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from joulehouse.warehouse.readings import refuse_pruned_day
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.gate import (STG_SUMMARY, WARNING, CheckResult, CheckSummary, counting_raw_rows,
                                      store_check_results)
from joulehouse.warehouse.sqlio import SqlFiles, used_parameters

CHECKS_SQL = SqlFiles("joulehouse.warehouse", "checks_sql")


@dataclass(frozen=True)
class Check:
    """One rule on one relation, and the GX expectation that decides it on a small frame.

    suite: the relation the rule is about (fct_check_results.suite).
    rule, rule_kwargs: the row-level expectation the rule means (GX class name and arguments).
    frame: the warehouse/checks_sql file whose rows GX validates.
    gx, gx_kwargs: the expectation GX runs on that frame: the rule itself on a relation's rows,
      a bound on a count on a summary.
    says: the observed_value text; `str.format` fields: unexpected, total, share, examples, the
      rule's arguments, and (summary frames) the summary's columns.
    counts: summary frames only: the columns with the unexpected and the total row counts.
    """

    suite: str
    severity: str
    rule: str
    rule_kwargs: dict
    frame: str
    gx: str
    gx_kwargs: dict
    says: str
    counts: tuple[str | None, str] | None = None


def _on_rows(suite: str, severity: str, gx: str, says: str, **kwargs) -> Check:
    """A rule GX checks on the relation's own (small) rows of the day."""
    return Check(suite, severity, gx, kwargs, f"{suite}_rows", gx, kwargs, says)


def _on_stg_summary(severity: str, rule: str, rule_kwargs: dict, gx: str, gx_kwargs: dict, says: str,
                    counts: tuple[str | None, str], suite: str = "stg_gpu_samples") -> Check:
    """A rule on readings that GX checks on the day's one-row count summary."""
    return Check(suite, severity, rule, rule_kwargs, STG_SUMMARY, gx, gx_kwargs, says, counts=counts)


def _at_most_zero(column: str) -> tuple[str, dict]:
    return "ExpectColumnMaxToBeBetween", {"column": column, "max_value": 0}


def _checks(settings: WarehouseSettings) -> list[Check]:
    """Every warning rule, grouped by relation, in the order they are reported (the blocking
    ones are warehouse.gate's)."""
    of_rows = "{unexpected:,} rows of {total:,}"
    return [
        # power or the counter: the lake contract wants one of them (a counter-only lake warned daily)
        _on_stg_summary(WARNING, "ExpectColumnValuesToNotBeNull", {"column": "power_w_or_energy_mj_total",
                                                                   "mostly": 0.99},
                        "ExpectColumnMaxToBeBetween", {"column": "no_energy_reading_share", "max_value": 0.01},
                        of_rows + " ({share:.2%}) have neither power_w nor energy_mj_total; at most 1% allowed",
                        counts=("no_energy_reading_rows", "n_rows")),
        _on_stg_summary(WARNING, "ExpectColumnValuesToBeInSet", {"column": "in_inventory", "value_set": [True]},
                        *_at_most_zero("not_in_inventory_rows"), of_rows + " come from GPUs not in the inventory",
                        counts=("not_in_inventory_rows", "n_rows")),
        _on_stg_summary(WARNING, "ExpectTableRowCountToBeBetween", {"max_value": 0}, *_at_most_zero("quarantined_rows"),
                        "{unexpected:,} rows quarantined (of {raw_rows:,} raw rows)",
                        counts=("quarantined_rows", "raw_rows"), suite="quarantine_gpu_samples"),
        _on_rows("fct_gpu_energy_hourly", WARNING, "ExpectColumnValuesToBeBetween",
                 of_rows + " ({share:.1%}) have coverage_ratio < {min_value}; at most 5% allowed",
                 column="coverage_ratio", min_value=0.9, mostly=0.95),
        _on_rows("fct_gpu_coverage_daily", WARNING, "ExpectColumnValuesToBeBetween",
                 "{unexpected:,} GPUs of {total:,} have coverage_ratio < {min_value}{examples}",
                 column="coverage_ratio", min_value=0.9),
        _on_rows("fct_gpu_coverage_daily", WARNING, "ExpectColumnValuesToBeBetween",
                 "{unexpected:,} GPUs of {total:,} have staleness_s > {max_value}{examples}",
                 column="staleness_s", max_value=3600),
        _on_rows("fct_pue_hourly", WARNING, "ExpectColumnValuesToBeBetween",
                 of_rows + " have pue outside [{min_value}, {max_value}]{examples}", column="pue", min_value=1.0, max_value=3.0),
        # The GPUs cannot draw more than the server they sit in (beyond meter error).
        _on_rows("fct_node_reconciliation_hourly", WARNING, "ExpectColumnValuesToBeBetween",
                 of_rows + " ({share:.1%}) have residual_share outside [{min_value}, {max_value}]; at most 5% allowed",
                 column="residual_share", min_value=-0.05, max_value=0.8, mostly=0.95),
        _on_rows("dim_gpu", WARNING, "ExpectColumnValuesToBeInSet",
                 "{unexpected:,} GPUs of {total:,} are not in the inventory{examples}", column="in_inventory", value_set=[True]),
    ]


def _snake(class_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", class_name).lower()


def _describe(check: Check) -> str:
    """The row-level rule as fct_check_results names it, e.g. expect_column_values_to_be_between(power_w),
    with the bound a warning sets on its column: (coverage_ratio >= 0.9) is not the gate's
    (coverage_ratio) of [0, 1], and the two stay apart under (day, suite, expectation)."""
    kwargs = check.rule_kwargs
    target = kwargs.get("column") or ",".join(kwargs.get("column_list", []))
    if not target and "column_A" in kwargs:
        target = f"{kwargs['column_A']},{kwargs['column_B']}"
    low, high = kwargs.get("min_value"), kwargs.get("max_value")
    if target and (low is not None or high is not None):
        target += (f" in [{low:g}, {high:g}]" if low is not None and high is not None
                   else f" >= {low:g}" if low is not None else f" <= {high:g}")
    return f"{_snake(check.rule)}({target})" if target else _snake(check.rule)


def _nan_beyond_bounds(sql: str, checks: list[Check]) -> str:
    """`sql` with each NaN of a column a row check bounds set to the infinity beyond its bound
    (-inf under a lower bound, else +inf). GX reads a pandas NaN as missing and skips it, and
    pandas has NaN for NULL too: a NaN PUE or coverage, which no build should make, was stored as
    a pass. NULL stays NULL (isnan(NULL) is NULL), a value the rules skip."""
    beyond = {}
    for check in checks:
        column = check.gx_kwargs.get("column")
        if check.counts is None and column and {"min_value", "max_value"} & check.gx_kwargs.keys():
            beyond.setdefault(column, "'-inf'" if check.gx_kwargs.get("min_value") is not None else "'inf'")
    if not beyond:
        return sql
    replaced = ", ".join(f'CASE WHEN isnan("{c}") THEN {v}::DOUBLE ELSE "{c}" END AS "{c}"' for c, v in beyond.items())
    return f"SELECT * REPLACE ({replaced}) FROM ({sql})"


def _frame(con: duckdb.DuckDBPyConnection, name: str, day: dt.date, checks: Sequence[Check] = ()):
    """The pandas frame of warehouse/checks_sql/<name>.sql for `day` (only the parameters it uses
    bound), NaN in the columns `checks` bound put beyond the bound (_nan_beyond_bounds)."""
    sql = _nan_beyond_bounds(CHECKS_SQL.text(name), list(checks))
    with counting_raw_rows(con, day) as counted:  # the summary counts the raw rows the build read
        bound = {"day": day, **counted}
        frame = con.execute(sql, {p: bound[p] for p in used_parameters(sql)}).df()
    # in one order, so the examples a warning names (GX's first unexpected rows) are the same ones
    # in every build of the same lake (the scan's order is not)
    return frame.sort_values(list(frame.columns), ignore_index=True, na_position="last") if len(frame.columns) else frame


def _plain(value: object) -> object:
    """numpy scalars to Python ones, NaN to None, long floats shortened, for text and JSON."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float):
        return None if math.isnan(value) else float(f"{value:.6g}")
    return value


def _examples(values: list) -> str:
    shown = [str(_plain(v)) for v in values[:3]]
    return f" (e.g. {', '.join(shown)})" if shown else ""


# The columns that name a row for a person, in the order they are shown ("node-01 GPU-1a2b...").
ROW_NAMES = ("host", "gpu_uuid", "site", "job_id")


def _named_rows(frame, result: dict) -> list[str]:
    """The failing rows named by host / GPU / site (their values alone, such as "False, False",
    say nothing), from GX's index list; [] when the frame has no naming column."""
    names = [c for c in ROW_NAMES if c in frame.columns]
    indices = result.get("partial_unexpected_index_list") or result.get("unexpected_index_list") or []
    if not names or not indices or not all(isinstance(i, int) for i in indices):
        return []
    rows = frame.loc[[i for i in indices[:3] if i in frame.index], names]
    return [" ".join(str(v) for v in row) for row in rows.itertuples(index=False)]


def _counts(check: Check, frame, result: dict) -> tuple[int | None, int | None, float | None, str]:
    """(unexpected rows, total rows, unexpected share, examples text) in the relation's rows."""
    if check.counts is not None:
        unexpected = None if check.counts[0] is None else int(frame[check.counts[0]].iloc[0])
        total = int(frame[check.counts[1]].iloc[0])
        examples = ""
    else:
        total = result.get("element_count", result.get("observed_value"))
        unexpected = result.get("unexpected_count")
        examples = _examples(_named_rows(frame, result) or list(dict.fromkeys(result.get("partial_unexpected_list") or [])))
    if "unexpected_percent" in result and check.counts is None:
        share = (result["unexpected_percent"] or 0.0) / 100.0  # GX's share: among non-NULL values
    else:
        share = unexpected / total if unexpected is not None and total else 0.0
    return unexpected, (None if total is None else int(total)), share, examples


def _result(check: Check, frame, outcome) -> CheckResult:
    detail = outcome.result or {}
    unexpected, total, share, examples = _counts(check, frame, detail)
    # column by column: a row of mixed types (frame.iloc[0]) would turn every count into a float
    values = {c: _plain(frame[c].iloc[0]) for c in (frame.columns if check.counts is not None else ())}
    values.update(check.rule_kwargs, unexpected=unexpected, total=total, share=share, examples=examples)
    validated = {"by": "great_expectations", "frame": check.frame, "expectation": _snake(check.gx),
                 "kwargs": check.gx_kwargs}
    if "observed_value" in detail:
        validated["observed_value"] = _plain(detail["observed_value"])
    return CheckResult(
        suite=check.suite,
        expectation=_describe(check),
        severity=check.severity,
        success=bool(outcome.success),
        observed_value=check.says.format(**values),
        details=json.dumps({"kwargs": check.rule_kwargs, "element_count": total, "unexpected_count": unexpected,
                            "validated": validated}, default=str),
    )


def validate_day(con: duckdb.DuckDBPyConnection, day: dt.date, settings: WarehouseSettings) -> CheckSummary:
    """Validate `day`'s warning rules with Great Expectations; reads only (a read-only connection
    does), stores nothing. Refuses a day whose readings are past retention (ReadingsPastRetention)."""
    refuse_pruned_day(con, day, "the warning data checks")
    import great_expectations as gx
    import great_expectations.expectations as gxe

    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    # A DAG task log is no place for a progress bar per expectation.
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    # One asset and batch definition for every frame: each new asset rewrites GX's whole config.
    frames = context.data_sources.add_pandas("joulehouse").add_dataframe_asset("check_frames")
    batches = frames.add_batch_definition_whole_dataframe(str(day))
    checks = _checks(settings)
    by_frame: dict[str, list[int]] = {}
    for i, check in enumerate(checks):
        by_frame.setdefault(check.frame, []).append(i)
    outcomes: dict[int, CheckResult] = {}
    for name, indices in by_frame.items():
        frame = _frame(con, name, day, [checks[i] for i in indices])
        batch = batches.get_batch(batch_parameters={"dataframe": frame})
        # One suite per frame: GX computes the frame's metrics once for all its expectations.
        suite = gx.ExpectationSuite(name=name)
        for i in indices:
            suite.add_expectation(getattr(gxe, checks[i].gx)(**checks[i].gx_kwargs, meta={"check": i}))
        validation = batch.validate(suite, result_format="COMPLETE")
        for outcome in validation.results:
            i = int(outcome.expectation_config.meta["check"])
            outcomes[i] = _result(checks[i], frame, outcome)
    return CheckSummary(day=day, results=tuple(outcomes[i] for i in range(len(checks))))


def run_checks(con: duckdb.DuckDBPyConnection, day: dt.date, settings: WarehouseSettings) -> CheckSummary:
    """Validate `day`'s warning rules with GX and store them in fct_check_results (that day's
    previous warning rows replaced; the gate's blocking rows stay). Never raises for a failed
    warning: the summary lists them."""
    summary = validate_day(con, day, settings)
    store_check_results(con, day, list(summary.results), WARNING)
    return summary
