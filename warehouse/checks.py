"""Data checks on one built day, with Great Expectations 1.x, results kept in fct_check_results.

Each relation has a suite of expectations, each marked `blocking` (a failure means the day's
numbers are wrong: the run stops) or `warning` (reported, the run goes on). GX validates pandas
frames that DuckDB hands over (`con.sql(...).df()`): GX's SQLAlchemy path with duckdb-engine
silently returns empty results. GX is imported inside run_checks (about 3 s).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field

import duckdb

from collectors.settings import WarehouseSettings
from warehouse.day_tables import replace_day_rows

BLOCKING, WARNING = "blocking", "warning"
QUARANTINE_REASONS = (
    "duplicate_key", "future_timestamp", "power_not_finite", "power_negative", "counter_negative",
    "power_unit_mw", "power_over_limit", "power_over_bound", "temp_out_of_range",
    "ratio_out_of_range", "util_out_of_range",
)


class BlockingCheckFailed(RuntimeError):
    """A blocking data check failed for the day; results are already in fct_check_results."""


@dataclass(frozen=True)
class CheckResult:
    suite: str
    expectation: str
    severity: str
    success: bool
    observed_value: str
    details: str


@dataclass(frozen=True)
class CheckSummary:
    day: dt.date
    results: tuple[CheckResult, ...] = field(default=())

    @property
    def failed_blocking(self) -> list[CheckResult]:
        return [r for r in self.results if r.severity == BLOCKING and not r.success]

    @property
    def failed_warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.severity == WARNING and not r.success]


def _suites(settings: WarehouseSettings) -> dict[str, list[tuple[str, str, dict]]]:
    """Per relation: (severity, expectation class name, arguments)."""
    abs_kwh_per_hour = settings.max_power_abs_w / 1000.0
    return {
        "stg_gpu_samples": [
            (BLOCKING, "ExpectTableRowCountToBeBetween", {"min_value": 1}),
            (BLOCKING, "ExpectColumnValuesToNotBeNull", {"column": "gpu_uuid"}),
            (BLOCKING, "ExpectColumnValuesToNotBeNull", {"column": "sampled_at"}),
            (BLOCKING, "ExpectCompoundColumnsToBeUnique", {"column_list": ["gpu_uuid", "sampled_at", "source"]}),
            (BLOCKING, "ExpectColumnValuesToBeBetween", {"column": "power_w", "min_value": 0}),
            (WARNING, "ExpectColumnValuesToNotBeNull", {"column": "power_w", "mostly": 0.99}),
            (WARNING, "ExpectColumnValuesToBeInSet", {"column": "in_inventory", "value_set": [True]}),
        ],
        "quarantine_gpu_samples": [
            (BLOCKING, "ExpectColumnValuesToBeInSet", {"column": "reason", "value_set": list(QUARANTINE_REASONS)}),
            (WARNING, "ExpectTableRowCountToBeBetween", {"max_value": 0}),
        ],
        "fct_gpu_energy_hourly": [
            (BLOCKING, "ExpectTableRowCountToBeBetween", {"min_value": 1}),
            (BLOCKING, "ExpectCompoundColumnsToBeUnique", {"column_list": ["hour_at", "gpu_uuid"]}),
            (BLOCKING, "ExpectColumnValuesToBeBetween", {"column": "energy_kwh", "min_value": 0, "max_value": abs_kwh_per_hour}),
            (BLOCKING, "ExpectColumnValuesToBeBetween", {"column": "coverage_ratio", "min_value": 0, "max_value": 1.0 + 1e-9}),
            (BLOCKING, "ExpectColumnValuesToBeInSet", {"column": "energy_source", "value_set": ["counter", "power_integral"]}),
            (WARNING, "ExpectColumnValuesToBeBetween", {"column": "coverage_ratio", "min_value": 0.9, "mostly": 0.95}),
        ],
        "fct_gpu_coverage_daily": [
            (WARNING, "ExpectColumnValuesToBeBetween", {"column": "coverage_ratio", "min_value": 0.9}),
            (WARNING, "ExpectColumnValuesToBeBetween", {"column": "staleness_s", "max_value": 3600}),
        ],
        "fct_pue_hourly": [
            (BLOCKING, "ExpectColumnValuesToBeBetween", {"column": "it_energy_kwh", "min_value": 0}),
            (WARNING, "ExpectColumnValuesToBeBetween", {"column": "pue", "min_value": 1.0, "max_value": 3.0}),
        ],
        "fct_node_reconciliation_hourly": [
            # The GPUs cannot draw more than the server they sit in (beyond meter error).
            (WARNING, "ExpectColumnValuesToBeBetween", {"column": "residual_share", "min_value": -0.05, "max_value": 0.8, "mostly": 0.95}),
        ],
        "dim_gpu": [
            (BLOCKING, "ExpectColumnValuesToBeUnique", {"column": "gpu_uuid"}),
            (WARNING, "ExpectColumnValuesToBeInSet", {"column": "in_inventory", "value_set": [True]}),
        ],
    }


def _checked_columns(checks: list[tuple[str, str, dict]]) -> list[str]:
    """The columns a suite's expectations read, in order of first mention."""
    columns: dict[str, None] = {}
    for _, _, kwargs in checks:
        for name in ([kwargs["column"]] if "column" in kwargs else []) + list(kwargs.get("column_list", [])):
            columns[name] = None
    return list(columns)


def _frame(con: duckdb.DuckDBPyConnection, relation: str, day: dt.date, columns: list[str]):
    # Only the columns the expectations read: a fleet-day of stg_gpu_samples with all its columns
    # is ~1 kB per row in pandas (gigabytes), and row counts do not depend on the columns.
    has_day = relation != "dim_gpu"
    selected = ", ".join(f'"{c}"' for c in columns) if columns else "*"
    sql = f"SELECT {selected} FROM {relation}" + (" WHERE day = ?" if has_day else "")
    return con.execute(sql, [day] if has_day else []).df()


def _describe(expectation_type: str, kwargs: dict) -> str:
    target = kwargs.get("column") or ",".join(kwargs.get("column_list", []))
    return f"{expectation_type}({target})" if target else expectation_type


def run_checks(con: duckdb.DuckDBPyConnection, day: dt.date, settings: WarehouseSettings) -> CheckSummary:
    """Validate `day`'s rows of each checked relation; store results in fct_check_results
    (that day's previous results replaced). Raises BlockingCheckFailed when a blocking check
    failed, after storing."""
    import great_expectations as gx
    import great_expectations.expectations as gxe

    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    # A DAG task log is no place for a progress bar per expectation.
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    source = context.data_sources.add_pandas("joulehouse")
    results: list[CheckResult] = []
    for relation, checks in _suites(settings).items():
        frame = _frame(con, relation, day, _checked_columns(checks))
        batch = source.add_dataframe_asset(relation).add_batch_definition_whole_dataframe(str(day)).get_batch(
            batch_parameters={"dataframe": frame}
        )
        for severity, class_name, kwargs in checks:
            expectation = getattr(gxe, class_name)(**kwargs)
            outcome = batch.validate(expectation)
            detail = outcome.result or {}
            observed = detail.get("observed_value", detail.get("unexpected_percent"))
            results.append(
                CheckResult(
                    suite=relation,
                    expectation=_describe(outcome.expectation_config.type, kwargs),
                    severity=severity,
                    success=bool(outcome.success),
                    observed_value=None if observed is None else str(observed),
                    details=json.dumps(
                        {"kwargs": kwargs, **{k: detail[k] for k in ("element_count", "unexpected_count") if k in detail}},
                        default=str,
                    ),
                )
            )
    _store(con, day, results)
    summary = CheckSummary(day=day, results=tuple(results))
    if summary.failed_blocking:
        failed = "; ".join(f"{r.suite}: {r.expectation} observed {r.observed_value}" for r in summary.failed_blocking)
        raise BlockingCheckFailed(f"{day}: {len(summary.failed_blocking)} blocking data check(s) failed: {failed}")
    return summary


def _store(con: duckdb.DuckDBPyConnection, day: dt.date, results: list[CheckResult]) -> None:
    checked_at = dt.datetime.now(dt.timezone.utc)
    replace_day_rows(con, day, {"fct_check_results": (
        ["day", "suite", "expectation", "severity", "success", "observed_value", "details", "checked_at"],
        [[day, r.suite, r.expectation, r.severity, r.success, r.observed_value, r.details, checked_at]
         for r in results])})
