"""The day's headline as a node_exporter textfile: the accounts' own totals, absent where the
day has none, and never an older day over a newer one."""

from __future__ import annotations

import datetime as dt
import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from accounting_world import DAY, add_node_energy, build_world
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.reports.export.headline_metrics import METRIC_NAMES, write_headline_metrics
from joulehouse.settings import CarbonSettings, TcoSettings


def metrics(path) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(path.read_text()) for s in family.samples}


def add_checks(con) -> None:
    con.execute("CREATE TABLE fct_check_results (day DATE, suite VARCHAR, expectation VARCHAR, severity VARCHAR, "
                "success BOOLEAN, observed_value VARCHAR, details VARCHAR, checked_at TIMESTAMPTZ)")
    earlier, gate, gx = (dt.datetime(2026, 3, 3, h, tzinfo=dt.timezone.utc) for h in (1, 2, 3))
    rows = [(DAY, "s", f"e{i}", "blocking", False, "", "{}", earlier) for i in range(3)]  # a run since fixed
    # the daily run: the blocking gate, then Great Expectations' warnings in their own task, later
    rows += [(DAY, "s", "e0", "blocking", False, "", "{}", gate), (DAY, "s", "e1", "blocking", True, "", "{}", gate),
             (DAY, "s", "e2", "warning", False, "", "{}", gx), (DAY, "s", "e3", "warning", True, "", "{}", gx),
             (DAY, "s", "e4", "warning", True, "", "{}", gx)]
    con.executemany("INSERT INTO fct_check_results VALUES (?,?,?,?,?,?,?,?)", rows)


def test_the_headline_is_the_days_own_totals(tmp_path):
    con = build_world()
    add_node_energy(con)
    add_checks(con)
    carbon = carbon_day(con, DAY, CarbonSettings(), None)
    cost = tco_day(con, DAY, TcoSettings(), None)
    export = tmp_path / "recommended-config-2026-03-02.json"
    export.write_text(json.dumps({"body": {"hosts": {"node-01": {"GPU-a100": {}, "GPU-h100": {}}, "node-02": {"GPU-x": {}}}}}))
    path = write_headline_metrics(con, DAY, tmp_path / "metrics" / "joulehouse_daily.prom", export_path=export)
    got = metrics(path)
    assert set(got) <= METRIC_NAMES
    gpu_kwh = con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE day = ?", [DAY]).fetchone()[0]
    assert got["joulehouse_daily_gpu_energy_kwh"] == pytest.approx(gpu_kwh)
    assert got["joulehouse_daily_carbon_gco2e"] == pytest.approx(carbon.total_gco2e)
    assert got["joulehouse_daily_it_energy_kwh"] == pytest.approx(carbon.energy_kwh)
    assert got["joulehouse_daily_cost_usd"] == pytest.approx(cost.total_cost_usd)
    assert got["joulehouse_daily_checks"] == 5  # both checkers' latest runs, not only the later one's
    assert got["joulehouse_daily_blocking_checks_failed"] == 1
    assert got["joulehouse_daily_warning_checks_failed"] == 1
    assert got["joulehouse_daily_recommendations_exported"] == 3
    assert got["joulehouse_daily_day_timestamp_seconds"] == dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc).timestamp()
    # The world has no coverage relation: that figure is absent, not 0.
    assert "joulehouse_daily_gpu_coverage_ratio" not in got and "joulehouse_daily_gpus" not in got


def test_an_older_day_leaves_a_newer_days_figures_in_place(tmp_path):
    con = build_world()
    path = tmp_path / "joulehouse_daily.prom"
    assert write_headline_metrics(con, DAY, path, export_path=None) == path
    newer = path.read_text()
    assert write_headline_metrics(con, DAY - dt.timedelta(days=1), path, export_path=None) is None
    assert path.read_text() == newer
    # No accounts run, no checks, no export: only the energy and the day.
    assert set(metrics(path)) == {"joulehouse_daily_gpu_energy_kwh", "joulehouse_daily_day_timestamp_seconds",
                                  "joulehouse_daily_written_timestamp_seconds"}
