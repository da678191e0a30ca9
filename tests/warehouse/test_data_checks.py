"""Data checks: the SQL gate stores the blocking rules and stops a bad day; Great Expectations
stores the warnings and never stops it; each replaces only its own rows of the day."""

from __future__ import annotations

import datetime as dt
import json

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lanes import examples
from warehouse_lakes import DAY, MIDNIGHT, gpu_rows, readings_as_table, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.checks import _frame, run_checks
from joulehouse.warehouse.gate import STG_SUMMARY, BlockingCheckFailed, run_gate


def _failed(con, severity: str = "blocking") -> dict[tuple[str, str], str]:
    rows = con.execute("SELECT suite, expectation, observed_value FROM fct_check_results "
                       "WHERE NOT success AND severity = ? AND day = ?", [severity, DAY]).fetchall()
    return {(suite, expectation): observed for suite, expectation, observed in rows}


@pytest.mark.slow
def test_clean_day_passes_blocking_checks_and_reports_warnings(lake, warehouse):
    write(lake, gpu_rows(range(0, 3601), 100.0))
    con = warehouse()
    gate = run_gate(con, DAY, WarehouseSettings())
    assert not gate.failed_blocking and {r.severity for r in gate.results} == {"blocking"}
    summary = run_checks(con, DAY, WarehouseSettings())
    assert not summary.failed_blocking and {r.severity for r in summary.results} == {"warning"}
    # Seen for one hour only, and not in any inventory: reported, not fatal.
    assert {r.suite for r in summary.failed_warnings} >= {"fct_gpu_coverage_daily", "dim_gpu"}
    not_listed = next(r for r in summary.failed_warnings
                      if r.suite == "stg_gpu_samples" and r.expectation == "expect_column_values_to_be_in_set(in_inventory)")
    assert not_listed.observed_value == "3,601 rows of 3,601 come from GPUs not in the inventory"
    # The examples name the GPUs, not the failing values ("(e.g. False)" says nothing).
    unlisted = next(r for r in summary.failed_warnings if r.suite == "dim_gpu")
    gpu = con.execute("SELECT gpu_uuid FROM dim_gpu").fetchone()[0]
    assert unlisted.observed_value == f"1 GPUs of 1 are not in the inventory (e.g. {gpu})"
    # and the gate's 'rebuild' row: the lake holds what the build read
    assert [r.success for _, r in gate.rebuild] == [True]
    checked = len(gate.results) + len(summary.results) + len(gate.rebuild)
    stored = con.execute("SELECT count(*), count(DISTINCT suite) FROM fct_check_results WHERE day = ?", [DAY]).fetchone()
    assert stored == (checked, 8)
    run_checks(con, DAY, WarehouseSettings())  # a re-run replaces its own rows, not appends, and keeps the gate's
    run_gate(con, DAY, WarehouseSettings())
    assert con.execute("SELECT count(*) FROM fct_check_results").fetchone()[0] == checked


@pytest.mark.parametrize("bug, message, expectation", [
    # an energy bug: a negative hour slipped into the fact table
    ("SET energy_kwh = -1", "fct_gpu_energy_hourly.*energy_kwh.*1 rows of 1 have energy_kwh outside",
     "expect_column_values_to_be_between(energy_kwh)"),
    # a GPU-hour stored under the wrong day: carbon and cost charge its embodied share and capital twice
    ("SET hour_at = hour_at + INTERVAL 1 DAY", "1 rows of 1 have an hour_at outside the day",
     "expect_column_values_to_be_in_set(hour_in_day)"),
    # 1.2 kWh in an hour from a GPU limited to 700 W (at most 1.5 x 0.7 kWh): one bound of 3 kWh
    # for every GPU had passed it
    ("SET energy_kwh = 1.2", r"1 rows of 1 have energy_kwh outside \[0, 1.5 x the GPU's highest limit x 1 h.*"
     r"GPU-0: 1.2 kWh of at most 1.05", "expect_column_values_to_be_between(energy_kwh)"),
    # a covered hour whose energy went missing: NULL had broken no rule
    # (and the day then has no measured energy at all)
    ("SET energy_kwh = NULL", "1 rows of 1 have a NULL key or coverage_ratio, or are covered with energy_kwh",
     ("expect_column_values_to_not_be_null(energy_kwh)", "expect_column_values_to_not_be_null(energy_kwh, mostly>0)")),
    # 24 GPU-hours and not one measured (no power, no counter): every rule had passed (review, helper-93)
    ("SET energy_kwh = NULL, coverage_ratio = 0, energy_source = NULL",
     "0 GPU-hours with measured energy of 1; at least 1 expected",
     "expect_column_values_to_not_be_null(energy_kwh, mostly>0)"),
])
def test_failing_blocking_check_raises_after_storing_results(lake, warehouse, bug, message, expectation):
    write(lake, gpu_rows(range(0, 61), 100.0))
    con = warehouse()
    con.execute(f"UPDATE fct_gpu_energy_hourly {bug}")
    with pytest.raises(BlockingCheckFailed, match=message):
        run_gate(con, DAY, WarehouseSettings())
    expected = [expectation] if isinstance(expectation, str) else list(expectation)
    assert sorted(e for _, e in _failed(con)) == sorted(expected)
    assert {suite for suite, _ in _failed(con)} == {"fct_gpu_energy_hourly"}


@pytest.mark.slow
def test_duplicated_readings_and_negative_power_in_staging_stop_the_day(lake, warehouse):
    write(lake, gpu_rows(range(0, 600), 100.0))
    con = warehouse()
    # A staging bug: 5 readings stored twice, and 3 negative powers let through quarantine.
    readings_as_table(con)
    con.execute("INSERT INTO stg_gpu_samples SELECT * FROM stg_gpu_samples WHERE sampled_at < ?",
                [MIDNIGHT + dt.timedelta(seconds=5)])
    con.execute("UPDATE stg_gpu_samples SET power_w = -20.046 WHERE sampled_at >= ? AND sampled_at < ?",
                [MIDNIGHT + dt.timedelta(seconds=100), MIDNIGHT + dt.timedelta(seconds=103)])
    with pytest.raises(BlockingCheckFailed) as err:
        run_gate(con, DAY, WarehouseSettings())
    failed = _failed(con)
    assert failed[("stg_gpu_samples", "expect_compound_columns_to_be_unique(gpu_uuid,sampled_at,source)")] == (
        "10 rows of 605 share their (gpu_uuid, sampled_at, source) with another row")
    assert failed[("stg_gpu_samples", "expect_column_values_to_be_between(power_w)")] == (
        "3 rows of 605 have power_w < 0 (lowest power_w: -20.046 W)")  # not the FLOAT as a DOUBLE, -20.04599952697754
    # 600 raw readings, 605 clean + 0 quarantined: rows appeared from nowhere.
    assert "600 raw rows" in failed[("stg_gpu_samples",
                                     "expect_column_pair_values_to_be_equal(raw_rows,clean_plus_quarantined_rows)")]
    assert "10 rows of 605 share" in str(err.value) and "stg_gpu_samples" in str(err.value)


@pytest.mark.slow
def test_lost_readings_and_unknown_quarantine_reason_stop_the_day(lake, warehouse):
    write(lake, gpu_rows(range(0, 600), 100.0) + gpu_rows([600.5, 601.5], -5.0))
    con = warehouse()
    assert con.execute("SELECT count(*) FROM quarantine_gpu_samples").fetchone()[0] == 2
    readings_as_table(con)
    con.execute("DELETE FROM stg_gpu_samples WHERE sampled_at < ?", [MIDNIGHT + dt.timedelta(seconds=10)])
    con.execute("UPDATE quarantine_gpu_samples SET reason = 'gremlins'")
    with pytest.raises(BlockingCheckFailed):
        run_gate(con, DAY, WarehouseSettings())
    run_checks(con, DAY, WarehouseSettings())
    failed = _failed(con)
    assert failed[("stg_gpu_samples", "expect_column_pair_values_to_be_equal(raw_rows,clean_plus_quarantined_rows)")] == (
        "602 raw rows read by the build from the lake's date= partition; 590 clean + 2 quarantined = 592")
    assert failed[("quarantine_gpu_samples", "expect_column_values_to_be_in_set(reason)")] == (
        "2 rows of 2 have a reason outside the known rules (e.g. gremlins)")
    # Quarantined rows are a warning by themselves, reported with the rest.
    assert ("quarantine_gpu_samples", "expect_table_row_count_to_be_between") in _failed(con, "warning")


@pytest.mark.slow
def test_many_null_powers_warn_without_stopping_the_day(lake, warehouse):
    write(lake, gpu_rows(range(0, 300), 100.0) + gpu_rows(range(300, 310), None))
    con = warehouse()
    summary = run_checks(con, DAY, WarehouseSettings())
    assert not summary.failed_blocking
    rule = ("stg_gpu_samples", "expect_column_values_to_not_be_null(power_w_or_energy_mj_total)")
    nulls = _failed(con, "warning")[rule]
    assert nulls == "10 rows of 310 (3.23%) have neither power_w nor energy_mj_total; at most 1% allowed"
    detail = json.loads(con.execute("SELECT details FROM fct_check_results WHERE expectation = ?",
                                    [rule[1]]).fetchone()[0])
    assert detail["unexpected_count"] == 10 and detail["validated"]["frame"] == STG_SUMMARY


def test_a_counter_only_lake_is_not_warned_of_missing_power(lake, warehouse):
    """The contract wants power_w or energy_mj_total: a lake of DCGM counters alone read '17,280
    rows of 17,280 (100.00%) have power_w NULL' every day (review, helper-93)."""
    write(lake, gpu_rows(range(0, 300), None, counter_mj=lambda t: 10**9 + 100_000 * t))
    con = warehouse()
    run_checks(con, DAY, WarehouseSettings())
    assert not [k for k in _failed(con, "warning") if "power_w" in k[1]]


def _summary_db(rows: list[tuple[str, float, str]]) -> duckdb.DuckDBPyConnection:
    """The three relations stg_gpu_samples_summary reads, in memory, with `rows` as (uuid, s, source)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE stg_gpu_samples (day DATE, gpu_uuid VARCHAR, sampled_at TIMESTAMPTZ, source VARCHAR, "
                "power_w DOUBLE, energy_mj_total BIGINT, in_inventory BOOLEAN)")
    for u, s, src in rows:
        con.execute("INSERT INTO stg_gpu_samples VALUES (?, ?, ?, ?, 1.0, NULL, true)",
                    [DAY, u, MIDNIGHT + dt.timedelta(seconds=s), src])
    con.execute("CREATE TABLE quarantine_gpu_samples (day DATE)")
    con.execute("CREATE VIEW raw_gpu_samples AS SELECT day AS date FROM stg_gpu_samples")
    return con


# Readings on whole seconds (the fast path) and half seconds, just before midnight (outside the
# day) and at the day's last second, some repeated: the count must be the exact one either way.
SECONDS = st.sampled_from([0.0, 0.5, 1.0, 1.25, 2.0, 86399.0, 86399.5, -0.5, 86400.0])
READINGS = st.lists(st.tuples(st.sampled_from(["GPU-0", "GPU-1"]), SECONDS, st.sampled_from(["nvml", "dcgm"])),
                    min_size=0, max_size=30)


@settings(max_examples=examples(40), deadline=None)
@given(READINGS)
def test_duplicate_key_rows_counts_every_copy_exactly(rows):
    con = _summary_db(rows)
    summary = _frame(con, STG_SUMMARY, DAY)
    expected = int(pd.DataFrame(rows, columns=["u", "s", "src"]).duplicated(keep=False).sum()) if rows else 0
    assert int(summary["duplicate_key_rows"].iloc[0]) == expected
    assert int(summary["n_rows"].iloc[0]) == len(rows) == int(summary["clean_plus_quarantined_rows"].iloc[0])


def test_the_rows_a_warning_names_are_the_same_whatever_order_the_scan_gives():
    """Two builds of one lake named "(e.g. synthetic-b9b7..., GPU-aaaa)" and "(e.g. GPU-aaaa,
    synthetic-b9b7...)": GX names the first unexpected rows of the frame, in the scan's order."""
    uuids = ["synthetic-b9b7", "GPU-aaaa", "GPU-0042", "GPU-zz"]
    frames = []
    for order in (uuids, list(reversed(uuids))):
        con = duckdb.connect()
        con.execute("CREATE TABLE dim_gpu (gpu_uuid VARCHAR, in_inventory BOOLEAN)")
        con.executemany("INSERT INTO dim_gpu VALUES (?, false)", [[u] for u in order])
        con.execute("CREATE TABLE fct_gpu_coverage_daily (gpu_uuid VARCHAR, day DATE)")
        con.executemany("INSERT INTO fct_gpu_coverage_daily VALUES (?, ?)", [[u, DAY] for u in order])
        frames.append(_frame(con, "dim_gpu_rows", DAY))
        con.close()
    assert frames[0]["gpu_uuid"].tolist() == frames[1]["gpu_uuid"].tolist() == sorted(uuids)


@pytest.mark.slow
def test_the_inventory_warning_counts_the_gpus_of_the_day_only(lake, warehouse):
    """dim_gpu holds every GPU ever seen: read whole, the demo's last day warned of 10 trace GPUs
    of other days it never saw."""
    write(lake, gpu_rows(range(0, 600), 100.0, uuid="GPU-yesterday"))  # DAY
    write(lake, gpu_rows(range(86400, 87000), 100.0, uuid="GPU-today"))  # the day after
    warehouse(DAY)
    con = warehouse(DAY + dt.timedelta(days=1))
    summary = run_checks(con, DAY + dt.timedelta(days=1), WarehouseSettings())
    unlisted = next(r for r in summary.failed_warnings if r.suite == "dim_gpu")
    assert unlisted.observed_value == "1 GPUs of 1 are not in the inventory (e.g. GPU-today)"


@pytest.mark.parametrize("stray", ["gpu_samples/date=2025-06-01/old.parquet",  # no host= folder
                                   "gpu_samples/date=latest/host=node-01/old.parquet"])  # no date
def test_a_stray_file_in_another_days_folder_does_not_stop_this_days_checks(lake, warehouse, stray):
    """The readings' summary counted the lake's rows through the view over every file: one stray file
    anywhere (a Hive partition mismatch, a date that does not parse) failed every later day's gate."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write(lake, gpu_rows(range(0, 3601, 10), 100.0))
    path = lake / stray
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(gpu_rows(range(0, 100, 10), 100.0)), path)
    con = warehouse()
    gate = run_gate(con, DAY, WarehouseSettings())
    assert not gate.failed_blocking
    lake_rows = next(r for r in gate.results if "raw_rows" in r.expectation)
    assert lake_rows.success and "361" in lake_rows.observed_value
    assert not run_checks(con, DAY, WarehouseSettings()).failed_blocking


@pytest.mark.parametrize("stray", ["nohost.parquet", "host=node-09/late/x.parquet"])
def test_a_file_in_this_days_folder_that_no_build_reads_stops_the_day_naming_it(lake, warehouse, stray):
    """60 readings of GPU-9 in date=D/nohost.parquet were in neither the clean rows nor the
    quarantine, and the nothing-lost rule passed: it counted the lake through the build's own
    listing (date=D/*/*.parquet). The gate now lists the day's whole folder and names the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write(lake, gpu_rows(range(0, 3601, 10), 100.0))
    path = lake / "gpu_samples" / f"date={DAY}" / stray
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(gpu_rows(range(0, 600, 10), 100.0, uuid="GPU-9", host="node-09")), path)
    con = warehouse()
    with pytest.raises(BlockingCheckFailed, match="not in a host= folder and were not read"):
        run_gate(con, DAY, WarehouseSettings())
    said = _failed(con)[("stg_gpu_samples",
                         "expect_column_pair_values_to_be_equal(raw_rows,clean_plus_quarantined_rows)")]
    assert said.startswith("361 raw rows") and str(path) in said


def test_a_rebuilt_day_that_fails_the_gate_keeps_none_of_the_earlier_builds_warnings(lake, warehouse):
    """The day passed and its warnings were stored; rebuilt with readings that then fail the gate,
    its old warnings ("0 rows quarantined", passed) stayed beside the new blocking rows, and the
    headline counted them. The gate replaces the day's rows; the warnings come back once it passes."""
    write(lake, gpu_rows(range(0, 3601, 10), 100.0))
    con = warehouse()
    run_checks(con, DAY, WarehouseSettings())
    assert con.execute("SELECT count(*) FROM fct_check_results WHERE severity = 'warning'").fetchone()[0] > 0
    con = warehouse()
    readings_as_table(con)
    con.execute("DELETE FROM stg_gpu_samples WHERE sampled_at < ?", [MIDNIGHT + dt.timedelta(seconds=100)])
    with pytest.raises(BlockingCheckFailed):
        run_gate(con, DAY, WarehouseSettings())
    # the gate's own rows only: its blocking rules and its 'rebuild' check of the lake
    assert con.execute("SELECT DISTINCT severity FROM fct_check_results WHERE day = ? ORDER BY 1",
                       [DAY]).fetchall() == [("blocking",), ("rebuild",)]


def test_an_inventory_gpu_that_sent_nothing_all_day_is_a_coverage_warning(lake, tmp_path, warehouse):
    """GPU-1 is listed and never read (dead, unplugged, its collector down): every check passed and
    no result named it. It is a GPU at coverage 0; a retired one, or one bought later, is not."""
    write(lake, gpu_rows(range(0, 86400, 10), 100.0))
    inventory = tmp_path / "inventory.csv"
    inventory.write_text(
        "gpu_uuid,host,gpu_index,gpu_model,rack,site,region,purchased_on,purchase_price_usd,embodied_kgco2e,lifetime_years,"
        "retired_on\n"
        "GPU-0,node-01,0,NVIDIA H100 80GB HBM3,r1,site-a,FR,2024-03-01,30000,150,5,\n"
        "GPU-1,node-01,1,NVIDIA H100 80GB HBM3,r1,site-a,FR,2024-03-01,30000,150,5,\n"
        "GPU-old,node-01,2,NVIDIA H100 80GB HBM3,r1,site-a,FR,2024-03-01,30000,150,5,2025-12-01\n"
        "GPU-new,node-01,3,NVIDIA H100 80GB HBM3,r1,site-a,FR,2026-06-01,30000,150,5,\n")
    settings = WarehouseSettings(inventory_path=str(inventory))
    con = warehouse(settings=settings)
    warned = {r.expectation: r.observed_value for r in run_checks(con, DAY, settings).failed_warnings
              if r.suite == "fct_gpu_coverage_daily"}
    assert warned["expect_column_values_to_be_between(coverage_ratio >= 0.9)"] == \
        "1 GPUs of 2 have coverage_ratio < 0.9 (e.g. GPU-1)"
    assert warned["expect_column_values_to_be_between(staleness_s <= 3600)"] == "1 GPUs of 2 have staleness_s > 3600 (e.g. GPU-1)"


def test_without_an_inventory_a_gpu_of_the_fleet_that_went_silent_is_a_coverage_warning(lake, warehouse):
    """No inventory (the default): only GPU-0 of a fleet read the days before sends anything, and
    every check passed (review, helper-93). A GPU read on 2 of the 7 days before is of the fleet; one
    read a single day (an imported trace) is not."""
    day_s = 86400
    write(lake, gpu_rows(range(-2 * day_s, day_s, 10), 100.0)
          + gpu_rows(range(-2 * day_s, 0, 10), 100.0, uuid="GPU-1")
          + gpu_rows(range(-day_s, 0, 10), 100.0, uuid="GPU-trace"))
    for back in (2, 1):
        warehouse(day=DAY - dt.timedelta(days=back))
    con = warehouse()
    warned = {r.expectation: r.observed_value for r in run_checks(con, DAY, WarehouseSettings()).failed_warnings
              if r.suite == "fct_gpu_coverage_daily"}
    assert warned["expect_column_values_to_be_between(coverage_ratio >= 0.9)"] == \
        "1 GPUs of 2 have coverage_ratio < 0.9 (e.g. GPU-1)"


def test_a_gpu_without_a_limit_is_bound_by_the_absolute_bound(lake, warehouse):
    write(lake, gpu_rows(range(0, 61), 100.0, limit_w=None))
    con = warehouse()
    con.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = 2.9")  # under 3 kWh (max_power_abs_w 3000 W)
    assert not run_gate(con, DAY, WarehouseSettings()).failed_blocking
    con.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = 3.1")
    with pytest.raises(BlockingCheckFailed, match="GPU-0: 3.1 kWh of at most 3"):
        run_gate(con, DAY, WarehouseSettings())


@pytest.mark.slow
def test_nan_it_energy_and_a_quarantined_row_without_reason_stop_the_day(lake, warehouse):
    """NaN < 0 is false, and list_contains of NULL is NULL: both had passed the gate."""
    write(lake, gpu_rows(range(0, 600), 100.0) + gpu_rows([600.5], -5.0))
    con = warehouse()
    con.execute("INSERT INTO fct_pue_hourly (hour_at, day, site, pue, it_energy_kwh, facility_energy_kwh) "
                "VALUES (?, ?, 'site-a', NULL, 'NaN'::DOUBLE, 1.0)", [MIDNIGHT, DAY])
    con.execute("UPDATE quarantine_gpu_samples SET reason = NULL")
    with pytest.raises(BlockingCheckFailed):
        run_gate(con, DAY, WarehouseSettings())
    failed = _failed(con)
    assert failed[("fct_pue_hourly", "expect_column_values_to_be_between(it_energy_kwh)")] == (
        "1 rows of 1 have it_energy_kwh < 0 or not a number (e.g. nan)")
    assert failed[("quarantine_gpu_samples", "expect_column_values_to_be_in_set(reason)")] == (
        "1 rows of 1 have a reason outside the known rules (e.g. NULL)")


@pytest.mark.slow
def test_a_nan_in_a_checked_column_is_a_failed_warning_and_null_is_skipped(lake, warehouse):
    """Great Expectations reads a pandas NaN as missing: a NaN PUE and coverage were stored as passes."""
    write(lake, gpu_rows(range(0, 3601), 100.0))
    con = warehouse()
    con.execute("INSERT INTO fct_pue_hourly (hour_at, day, site, pue, it_energy_kwh, facility_energy_kwh) "
                "VALUES (?, ?, 'site-a', 'NaN'::DOUBLE, 1.0, 1.0), (?, ?, 'site-a', NULL, 1.0, NULL)",
                [MIDNIGHT, DAY, MIDNIGHT + dt.timedelta(hours=1), DAY])
    con.execute("UPDATE fct_gpu_coverage_daily SET coverage_ratio = 'NaN'::DOUBLE, staleness_s = 'NaN'::DOUBLE")
    run_checks(con, DAY, WarehouseSettings())
    failed = _failed(con, "warning")
    assert failed[("fct_pue_hourly", "expect_column_values_to_be_between(pue in [1, 3])")].startswith(
        "1 rows of 2 have pue outside [1.0, 3.0]")  # the NULL PUE (no facility reading) is skipped
    assert failed[("fct_gpu_coverage_daily", "expect_column_values_to_be_between(coverage_ratio >= 0.9)")] == (
        "1 GPUs of 1 have coverage_ratio < 0.9 (e.g. GPU-0)")
    assert failed[("fct_gpu_coverage_daily", "expect_column_values_to_be_between(staleness_s <= 3600)")] == (
        "1 GPUs of 1 have staleness_s > 3600 (e.g. GPU-0)")


@pytest.mark.slow
def test_checking_again_a_day_past_readings_retention_is_refused_and_keeps_its_results(lake, warehouse):
    """Its readings pruned, the day read as 0 readings and lost rows: the gate stopped a good day
    and replaced its stored results with that false stop."""
    from joulehouse.warehouse.readings import ReadingsPastRetention

    keep_one = WarehouseSettings(readings_retention_days=1)
    for k in range(3):
        write(lake, gpu_rows(range(k * 86400, k * 86400 + 600), 100.0))
    con = warehouse(DAY, keep_one)
    run_gate(con, DAY, keep_one)
    stored = con.execute("SELECT * FROM fct_check_results WHERE day = ? ORDER BY ALL", [DAY]).fetchall()
    for k in (1, 2):
        warehouse(DAY + dt.timedelta(days=k), keep_one)
    with pytest.raises(ReadingsPastRetention, match="past retention.*rebuild the day to check it again"):
        run_gate(con, DAY, keep_one)
    with pytest.raises(ReadingsPastRetention):
        run_checks(con, DAY, keep_one)
    assert con.execute("SELECT * FROM fct_check_results WHERE day = ? ORDER BY ALL", [DAY]).fetchall() == stored
    assert not run_gate(con, DAY + dt.timedelta(days=2), keep_one).failed_blocking  # a kept day is checked


@pytest.mark.slow
def test_a_day_that_quarantined_most_of_its_readings_stops(lake, warehouse):
    """36 clean readings and 3,564 negative ones passed the gate with warnings only: the hour's
    energy stood on 1% of it."""
    write(lake, gpu_rows(range(0, 36), 100.0) + gpu_rows(range(36, 3600), -5.0))
    con = warehouse()
    with pytest.raises(BlockingCheckFailed, match="3,564 of 3,600 readings quarantined; at most 50% allowed"):
        run_gate(con, DAY, WarehouseSettings())
    assert ("quarantine_gpu_samples", "expect_column_values_to_be_null(reason)") in _failed(con)
    assert not run_gate(con, DAY, WarehouseSettings(max_quarantined_share=1.0)).failed_blocking
