"""The blocking data checks of a built day: SQL over the day's relations, no Great Expectations.

A blocking rule means that the day's numbers would be wrong if it failed (readings lost or
counted twice, a negative or impossible energy, an hour filed under the wrong day), so the daily
run stops on it. The gate counts each rule's offending rows in DuckDB, with bound parameters, from
small SQL files (warehouse/gate_sql/*.sql, and checks_sql/stg_gpu_samples_summary.sql for the
readings), one row of counts per relation: it passes in well under a second and never waits for
Great Expectations' import (about 3 s). GX validates the warning rules over the day's summaries in
a task of its own (warehouse.checks), off the critical path. Both write fct_check_results, each
its own rows of the day (severity 'blocking' here, 'warning' there), with the expectation names
and observed_value texts GX's rules would give, so the report reads one table whoever checked.

The rules judge a day on the lake files its build read (fct_warehouse_build_daily,
fct_warehouse_build_lake_files), not on the lake at gate time: a node that ships after the build
had made the nothing-lost rule stop a good day. A file that came, went or changed since a build
is no error of that day's facts but a reason to re-run it: the gate says so with severity
'rebuild', for each built day whose build read the checked day's folder (the day before, the day,
the day after), and never stops the run for it. A folder found changed while a compaction was
half done there is looked at again once it ends (warehouse/lake_compactions_seen.py says what is left).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import posixpath
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from joulehouse.warehouse.lake_contract import build_dates, narrowed, reading_own_day, stand_in_files
from joulehouse.warehouse.lake_fingerprint import RELATION as LAKE_FILES, FolderChange, LakeLook, lake_changes
from joulehouse.warehouse.readings import refuse_pruned_day
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.sqlio import SqlFiles, columns_of, records, relation_exists, replace_day_rows, used_parameters

# 'rebuild': the lake changed since the day was built; its facts stand on what the build read
BLOCKING, WARNING, REBUILD = "blocking", "warning", "rebuild"
QUARANTINE_REASONS = (
    "duplicate_key", "key_missing", "future_timestamp", "outside_partition_day", "power_not_finite", "limit_not_finite", "counter_not_finite",
    "power_negative", "counter_negative",
    "power_unit_mw", "power_over_limit", "power_over_bound", "temp_out_of_range",
    "ratio_out_of_range", "util_out_of_range", "clock_out_of_range",
)
GATE_SQL = SqlFiles("joulehouse.warehouse", "gate_sql")
CHECKS_SQL = SqlFiles("joulehouse.warehouse", "checks_sql")
STG_SUMMARY = "stg_gpu_samples_summary"
CHECKED_BY = "sql_gate"

log = logging.getLogger(__name__)


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
    # (day built, its 'rebuild' result) of each built day whose build read this day's folder
    rebuild: tuple[tuple[dt.date, CheckResult], ...] = field(default=())

    @property
    def failed_blocking(self) -> list[CheckResult]:
        return [r for r in self.results if r.severity == BLOCKING and not r.success]

    @property
    def failed_warnings(self) -> list[CheckResult]:
        return [r for r in self.results if r.severity == WARNING and not r.success]


def _none_unexpected(row: dict, rule: "GateRule") -> bool:
    return row[rule.unexpected] == 0


def _at_least_one_row(row: dict, rule: "GateRule") -> bool:
    return row[rule.total] >= 1


def _nothing_lost(row: dict, rule: "GateRule") -> bool:
    return row["raw_rows"] == row["clean_plus_quarantined_rows"] and not row["stray_files"]


def _stray_note(row: dict) -> str:
    """What the nothing-lost rule says of files no build reads (date=D/x.parquet)."""
    if not row["stray_files"]:
        return ""
    return (f"; {row['stray_files']:,} Parquet file(s) under the day's date= folder are not in a host= folder "
            f"and were not read (e.g. {row['stray_file_example']}): move them into date=D/host=H/")


@dataclass(frozen=True)
class GateRule:
    """One blocking rule: the relation (suite), the rule as fct_check_results names it, the SQL
    file that counts it (one row), which of its columns hold the offending and the total rows and
    the examples, how the row decides the rule, and the observed_value text (`str.format` fields:
    unexpected, total, examples and the frame's columns)."""

    suite: str
    expectation: str
    frame: str
    unexpected: str | None
    total: str
    says: str
    passes: Callable[[dict, "GateRule"], bool] = _none_unexpected
    examples: str | None = None


def _few_quarantined(row: dict, rule: "GateRule") -> bool:
    return row["raw_rows"] == 0 or row["quarantined_rows"] <= row["max_quarantined_share"] * row["raw_rows"]


def _rules() -> list[GateRule]:
    of_rows = "{unexpected:,} rows of {total:,}"
    stg, energy = "stg_gpu_samples", "fct_gpu_energy_hourly"
    energy_gate = "fct_gpu_energy_hourly_gate"
    return [
        GateRule(stg, "expect_table_row_count_to_be_between", STG_SUMMARY, None, "n_rows",
                 "{total:,} rows; at least 1 expected", _at_least_one_row),
        GateRule(stg, "expect_column_values_to_not_be_null(gpu_uuid)", STG_SUMMARY, "gpu_uuid_null_rows", "n_rows",
                 of_rows + " have gpu_uuid NULL"),
        GateRule(stg, "expect_column_values_to_not_be_null(sampled_at)", STG_SUMMARY, "sampled_at_null_rows", "n_rows",
                 of_rows + " have sampled_at NULL"),
        GateRule(stg, "expect_compound_columns_to_be_unique(gpu_uuid,sampled_at,source)", STG_SUMMARY,
                 "duplicate_key_rows", "n_rows", of_rows + " share their (gpu_uuid, sampled_at, source) with another row"),
        GateRule(stg, "expect_column_values_to_be_between(power_w)", STG_SUMMARY, "power_w_negative_rows", "n_rows",
                 of_rows + " have power_w < 0 (lowest power_w: {power_w_min} W)"),
        # Every raw reading of the day is either clean or quarantined with a reason: none lost.
        GateRule(stg, "expect_column_pair_values_to_be_equal(raw_rows,clean_plus_quarantined_rows)", STG_SUMMARY,
                 None, "n_rows", "{raw_rows:,} raw rows {raw_rows_counted}; {total:,} clean + "
                 "{quarantined_rows:,} quarantined = {clean_plus_quarantined_rows:,}{stray_note}", _nothing_lost),
        # a day whose readings were mostly quarantined: its facts stand on what is left
        GateRule("quarantine_gpu_samples", "expect_column_values_to_be_null(reason)", STG_SUMMARY, "quarantined_rows",
                 "raw_rows", "{unexpected:,} of {total:,} readings quarantined; at most {max_quarantined_share:.0%} "
                 "allowed ([warehouse] max_quarantined_share)", _few_quarantined),
        GateRule("quarantine_gpu_samples", "expect_column_values_to_be_in_set(reason)", "quarantine_gpu_samples_gate",
                 "unknown_reason_rows", "n_rows", of_rows + " have a reason outside the known rules{examples}",
                 examples="unknown_reason_examples"),
        GateRule(energy, "expect_table_row_count_to_be_between", energy_gate, None, "n_rows",
                 "{total:,} GPU-hours; at least 1 expected", _at_least_one_row),
        # 24 GPU-hours of NULL energy passed the two rules above and below: the day's report and
        # export stood on nothing measured (review, helper-93)
        GateRule(energy, "expect_column_values_to_not_be_null(energy_kwh, mostly>0)", energy_gate, None,
                 "measured_rows", "{total:,} GPU-hours with measured energy of {n_rows:,}; at least 1 expected",
                 _at_least_one_row),
        GateRule(energy, "expect_compound_columns_to_be_unique(hour_at,gpu_uuid)", energy_gate, "duplicate_key_rows",
                 "n_rows", of_rows + " share their (hour_at, gpu_uuid) with another row{examples}",
                 examples="duplicate_key_examples"),
        GateRule(energy, "expect_column_values_to_be_in_set(hour_in_day)", energy_gate, "hour_outside_day_rows",
                 "n_rows", of_rows + " have an hour_at outside the day{examples}", examples="hour_outside_day_examples"),
        GateRule(energy, "expect_column_values_to_be_between(energy_kwh)", energy_gate, "energy_out_of_range_rows",
                 "n_rows", of_rows + " have energy_kwh outside [0, {max_power_over_limit_ratio:g} x the GPU's highest "
                 "limit x 1 h; {max_energy_kwh:g} kWh where no limit was read]{examples}",
                 examples="energy_out_of_range_examples"),
        GateRule(energy, "expect_column_values_to_not_be_null(energy_kwh)", energy_gate, "incomplete_rows",
                 "n_rows", of_rows + " have a NULL key or coverage_ratio, or are covered with energy_kwh or "
                 "energy_source NULL{examples}", examples="incomplete_examples"),
        GateRule(energy, "expect_column_values_to_be_between(coverage_ratio)", energy_gate, "coverage_out_of_range_rows",
                 "n_rows", of_rows + " have coverage_ratio outside [0, 1]{examples}",
                 examples="coverage_out_of_range_examples"),
        GateRule(energy, "expect_column_values_to_be_in_set(energy_source)", energy_gate, "unknown_source_rows",
                 "n_rows", of_rows + " have energy_source not in ['counter', 'power_integral']{examples}",
                 examples="unknown_source_examples"),
        GateRule("fct_pue_hourly", "expect_column_values_to_be_between(it_energy_kwh)", "fct_pue_hourly_gate",
                 "it_energy_negative_rows", "n_rows", of_rows + " have it_energy_kwh < 0 or not a number{examples}",
                 examples="it_energy_negative_examples"),
        GateRule("dim_gpu", "expect_column_values_to_be_unique(gpu_uuid)", "dim_gpu_gate", "duplicate_uuid_rows",
                 "n_rows", "{unexpected:,} GPUs of {total:,} share their gpu_uuid with another row{examples}",
                 examples="duplicate_uuid_examples"),
    ]


def _examples(values: list | None) -> str:
    shown = [str(v) for v in (values or [])[:3]]
    return f" (e.g. {', '.join(shown)})" if shown else ""


def _counted(con: duckdb.DuckDBPyConnection, name: str, params: dict) -> dict | None:
    """The one row of counts of gate_sql/<name>.sql (or the readings' summary); None when the
    relation it reads is not in the warehouse (an optional dataset the lake does not have)."""
    files = CHECKS_SQL if name == STG_SUMMARY else GATE_SQL
    sql = files.text(name)
    try:
        # the readings' summary counts the raw rows the build read; the other frames read no file
        with counting_raw_rows(con, params["day"]) if name == STG_SUMMARY else nullcontext({}) as counted:
            bound = {**params, **counted}
            rows = records(con.execute(sql, {p: bound[p] for p in used_parameters(sql)}))
    except duckdb.CatalogException:
        return None
    return rows[0]


def built_raw_rows(con: duckdb.DuckDBPyConnection, day: dt.date) -> int | None:
    """The raw GPU readings of `day`'s own date= folder in the files its build read; None when the
    warehouse has no such record (never built, or built before the count was kept)."""
    table = "fct_warehouse_build_daily"
    if not relation_exists(con, table) or "n_raw_gpu_samples" not in columns_of(con, table):
        return None
    row = con.execute(f"SELECT n_raw_gpu_samples FROM {table} WHERE day = ?", [day]).fetchone()
    return None if row is None or row[0] is None else int(row[0])


@contextmanager
def counting_raw_rows(con: duckdb.DuckDBPyConnection, day: dt.date) -> Iterator[dict]:
    """Within the block, checks_sql/stg_gpu_samples_summary.sql counts the raw rows `day`'s build
    read, bound by the parameters it yields: no lake file is opened (raw_gpu_samples reads an empty
    stand-in). A day built before the count was kept counts its own date= folder in the lake now."""
    built = built_raw_rows(con, day)
    if built is None:
        with reading_own_day(con, day):
            yield {"built_raw_rows": None}
        return
    with tempfile.TemporaryDirectory(prefix="jh-stand-in-") as folder:
        with narrowed(con, {"gpu_samples": [stand_in_files(Path(folder))["gpu_samples"]]}):
            yield {"built_raw_rows": built}


def evaluate_gate(con: duckdb.DuckDBPyConnection, day: dt.date, settings: WarehouseSettings) -> list[CheckResult]:
    """Every blocking rule decided on `day`'s rows; a relation the warehouse lacks is no rule broken
    when it is optional (fct_pue_hourly without a facility meter) and fails when it is required."""
    params = {"day": day, "max_energy_kwh": settings.max_power_abs_w / 1000.0,
              "max_power_over_limit_ratio": settings.max_power_over_limit_ratio,
              "max_quarantined_share": settings.max_quarantined_share,
              "known_reasons": list(QUARANTINE_REASONS)}
    frames: dict[str, dict | None] = {}
    results = []
    for rule in _rules():
        if rule.frame not in frames:
            frames[rule.frame] = _counted(con, rule.frame, params)
        row = frames[rule.frame]
        if row is None:
            required = rule.suite in ("stg_gpu_samples", "fct_gpu_energy_hourly", "dim_gpu")
            results.append(_result(rule, not required, f"{rule.suite} is not in the warehouse", None, None))
            continue
        unexpected = None if rule.unexpected is None else int(row[rule.unexpected])
        total = int(row[rule.total])
        values = {**row, **params, "unexpected": unexpected, "total": total,
                  "stray_note": _stray_note(row) if "stray_files" in row else "",
                  "examples": _examples(row.get(rule.examples) if rule.examples else None)}
        results.append(_result(rule, bool(rule.passes({**row, **params}, rule)), rule.says.format(**values),
                               unexpected, total))
    return results


def _result(rule: GateRule, success: bool, observed: str, unexpected: int | None, total: int | None) -> CheckResult:
    details = {"element_count": total, "unexpected_count": unexpected,
               "validated": {"by": CHECKED_BY, "frame": rule.frame, "column": rule.unexpected}}
    return CheckResult(suite=rule.suite, expectation=rule.expectation, severity=BLOCKING, success=success,
                       observed_value=observed, details=json.dumps(details, default=str))


def _files(n: int) -> str:
    return f"{n:,} file" if n == 1 else f"{n:,} files"


def _some(names: tuple[str, ...] | list[str], shown: int = 3) -> str:
    """The first `shown` names, and how many more: a compaction of hundreds of files is one line."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more:,} more" if more > 0 else "")


def _folder_change(day: dt.date, change: FolderChange) -> str:
    built, now = change.built, change.now
    said = []
    if built["n_rows"] != now["n_rows"]:
        rows = lambda r: "unreadable" if r["n_rows"] is None else f"{r['n_rows']:,}"  # noqa: E731
        said.append(f"{rows(built)} readings when built, {rows(now)} now")
    if built["hosts"] != now["hosts"]:
        hosts = lambda r: r["hosts"].replace(",", ", ") or "none"  # noqa: E731
        said.append(f"hosts reaching across midnight when built: {hosts(built)}; now: {hosts(now)}"
                    if change.partition_date != day else f"hosts when built: {hosts(built)}; now: {hosts(now)}")
    if change.rewritten and not said:  # as many readings, the same hosts: only the files say it
        said.append("files changed, not by a compaction: " + _some(change.rewritten))
    if change.merged_in:
        said.append("a compaction merged in what the build did not read, with readings inside its window "
                    "(or of times its ledger does not say): " + _some(change.merged_in))
    if change.compacting:
        folders = _some(list(dict.fromkeys(posixpath.dirname(p) for p in change.compacting)))
        said.append(f"a compaction of {folders} was under way or cut short when the gate looked: its old and new "
                    f"files stand side by side until it ends (the next gate looks again; joulehouse compact --lake "
                    f"LAKE --date {change.partition_date} finishes one cut short)")
    return (f"{change.dataset} date={change.partition_date}: {'; '.join(said)} ({_files(built['n_files'])} when "
            f"built, {_files(now['n_files'])} now)")


def lake_files_result(con: duckdb.DuckDBPyConnection, day: dt.date,
                      look: LakeLook | None = None) -> CheckResult | None:
    """Whether the lake still holds the files `day`'s build read ('rebuild' severity); None when the
    build recorded none (never built, built before the record was kept) or there is no lake.
    `look`: what this gate listed and read of the lake before, added to."""
    compared = lake_changes(con, day, look)
    if compared is None:
        return None
    changes, built = compared
    n_files, size_bytes = sum(r["n_files"] for r in built), sum(r["size_bytes"] for r in built)
    if changes:
        observed = ("; ".join(_folder_change(day, c) for c in changes)
                    + f": the facts of {day} stand on the files as its build read them; a rebuild of {day} "
                    f"(its daily run again: joulehouse run --date {day}) takes the change in")
    else:
        observed = f"the lake holds the files as the build of {day} read them ({_files(n_files)}, {size_bytes:,} bytes)"
    details = {"element_count": len(built), "unexpected_count": len(changes), "files_read": n_files,
               "validated": {"by": CHECKED_BY, "frame": LAKE_FILES, "column": "n_rows, hosts"}}
    return CheckResult(suite=LAKE_FILES, expectation="expect_lake_files_to_be_those_the_build_read",
                       severity=REBUILD, success=not changes, observed_value=observed,
                       details=json.dumps(details, default=str))


def run_gate(con: duckdb.DuckDBPyConnection, day: dt.date, settings: WarehouseSettings) -> CheckSummary:
    """Decide `day`'s blocking rules, store them in fct_check_results (the day's previous blocking
    rows replaced) and raise BlockingCheckFailed, after storing, when one failed: its message names
    each failed rule, its relation and the counts. A day whose readings are past retention is
    refused before anything is stored (readings.ReadingsPastRetention). Also stores, never raising,
    the 'rebuild' result of each built day whose build read `day`'s folder (lake_files_result)."""
    refuse_pruned_day(con, day, "the blocking data checks")
    look = LakeLook()  # the three days' folders overlap: each is listed once, each footer read once
    rebuild = tuple((d, r) for d in build_dates(day) if (r := lake_files_result(con, d, look)) is not None)
    summary = CheckSummary(day=day, results=tuple(evaluate_gate(con, day, settings)), rebuild=rebuild)
    store_check_results(con, day, list(summary.results), BLOCKING)
    for built_day, result in rebuild:
        store_check_results(con, built_day, [result], REBUILD)
        if not result.success:
            log.warning("%s: %s", built_day, result.observed_value)
    if summary.failed_blocking:
        failed = "; ".join(f"{r.suite}: {r.expectation}: {r.observed_value}" for r in summary.failed_blocking)
        raise BlockingCheckFailed(f"{day}: {len(summary.failed_blocking)} blocking data check(s) failed: {failed}")
    return summary


def store_check_results(con: duckdb.DuckDBPyConnection, day: dt.date, results: list[CheckResult], severity: str) -> None:
    """Replace `day`'s rows of `severity` in fct_check_results with `results` (the other
    severity's rows, written by the other checker, stay)."""
    checked_at = dt.datetime.now(dt.timezone.utc)
    replace_day_rows(con, day, {"fct_check_results": (
        ["day", "suite", "expectation", "severity", "success", "observed_value", "details", "checked_at"],
        [[day, r.suite, r.expectation, r.severity, r.success, r.observed_value, r.details, checked_at]
         for r in results])}, where={"severity": severity})
