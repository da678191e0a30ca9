"""Great Expectations checks: results stored, blocking failures stop the day, warnings do not."""

from __future__ import annotations

import pytest
from warehouse_lakes import DAY, gpu_rows, write

from collectors.settings import WarehouseSettings
from warehouse.checks import BlockingCheckFailed, run_checks


def test_clean_day_passes_blocking_checks_and_reports_warnings(lake, warehouse):
    write(lake, gpu_rows(range(0, 3601), 100.0))
    con = warehouse()
    summary = run_checks(con, DAY, WarehouseSettings())
    assert not summary.failed_blocking
    # Seen for one hour only, and not in any inventory: reported, not fatal.
    assert {r.suite for r in summary.failed_warnings} >= {"fct_gpu_coverage_daily", "dim_gpu"}
    stored = con.execute("SELECT count(*), count(DISTINCT suite) FROM fct_check_results WHERE day = ?", [DAY]).fetchone()
    assert stored == (len(summary.results), 7)
    run_checks(con, DAY, WarehouseSettings())  # a re-run replaces, not appends
    assert con.execute("SELECT count(*) FROM fct_check_results").fetchone()[0] == len(summary.results)


def test_failing_blocking_check_raises_after_storing_results(lake, warehouse):
    write(lake, gpu_rows(range(0, 61), 100.0))
    con = warehouse()
    # Simulate an energy bug: a negative hour slipped into the fact table.
    con.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = -1")
    with pytest.raises(BlockingCheckFailed, match="fct_gpu_energy_hourly.*energy_kwh"):
        run_checks(con, DAY, WarehouseSettings())
    failed = con.execute(
        "SELECT suite, severity FROM fct_check_results WHERE NOT success AND severity = 'blocking'"
    ).fetchall()
    assert failed == [("fct_gpu_energy_hourly", "blocking")]
