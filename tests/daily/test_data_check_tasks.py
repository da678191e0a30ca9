"""The daily run's two check tasks: the blocking gate (SQL) stops a bad day without importing
Great Expectations, and the GX task still validates the day and writes its rows beside the gate's."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys

import duckdb
import pyarrow as pa
import pytest

from joulehouse import daily
from joulehouse.collectors.writer import write_dataset
from joulehouse.settings import LakeSettings, Settings, WarehouseSettings, settings_to_toml
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 4, 1)
START = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)
GATE_IN_A_FRESH_PROCESS = """
import json, sys
from joulehouse import daily
from joulehouse.warehouse.gate import BlockingCheckFailed
try:
    daily.check_data(sys.argv[1], sys.argv[2])
    error = None
except BlockingCheckFailed as exc:
    error = str(exc)
print(json.dumps({"error": error, "gx_imported": sorted(m for m in sys.modules if m.startswith("great_expectations"))[:3]}))
"""


def _site(tmp_path) -> tuple[str, str]:
    lake, db = tmp_path / "lake", tmp_path / "warehouse.duckdb"
    rows = [dict(sampled_at=START + dt.timedelta(seconds=s), host="node-01", gpu_index=0, gpu_uuid="GPU-1",
                 gpu_model="NVIDIA H100 80GB HBM3", power_w=250.0 + s % 7, source="nvml") for s in range(0, 7200, 5)]
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))
    config = tmp_path / "joulehouse.toml"
    config.write_text(settings_to_toml(Settings(lake=LakeSettings(path=str(lake)), warehouse=WarehouseSettings(
        db_path=str(db), compact_lake=False))))
    daily.build_warehouse(DAY.isoformat(), str(config))
    return str(db), str(config)


def _gate(config: str) -> dict:
    out = subprocess.run([sys.executable, "-c", GATE_IN_A_FRESH_PROCESS, DAY.isoformat(), config],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _stored(db: str) -> dict[str, list]:
    con = duckdb.connect(db, read_only=True)
    try:
        rows = con.execute("SELECT severity, expectation, success, details FROM fct_check_results WHERE day = ? "
                           "ORDER BY severity, suite, expectation", [DAY]).fetchall()
    finally:
        con.close()
    found: dict[str, list] = {}
    for severity, expectation, success, details in rows:
        found.setdefault(severity, []).append((expectation, success, json.loads(details)["validated"]["by"]))
    return found


@pytest.mark.slow
def test_the_gate_stops_a_bad_day_without_importing_great_expectations(tmp_path):
    db, config = _site(tmp_path)
    con = connect(db, None)
    con.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = -1 WHERE hour_at = ?", [START])  # an energy bug
    con.close()
    gate = _gate(config)
    assert gate["gx_imported"] == []
    assert "1 blocking data check(s) failed" in gate["error"]
    assert "fct_gpu_energy_hourly: expect_column_values_to_be_between(energy_kwh): 1 rows of 2" in gate["error"]
    stored = _stored(db)  # the failed gate's rows are published for whoever asks why
    assert ("expect_column_values_to_be_between(energy_kwh)", False, "sql_gate") in stored["blocking"]
    assert "warning" not in stored


@pytest.mark.slow
def test_a_good_day_passes_the_gate_and_great_expectations_writes_its_rows_beside_it(tmp_path):
    db, config = _site(tmp_path)
    gate = _gate(config)
    assert gate == {"error": None, "gx_imported": []}
    result = daily.validate_data(DAY.isoformat(), config)
    stored = _stored(db)
    assert result["warnings"] == len(stored["warning"]) > 0
    assert {by for _, _, by in stored["warning"]} == {"great_expectations"}
    assert all(success for _, success, _ in stored["blocking"]) and {by for _, _, by in stored["blocking"]} == {"sql_gate"}
    # Seen for two hours only and in no inventory: GX reports it, nothing stops the day.
    failed = [expectation for expectation, success, _ in stored["warning"] if not success]
    assert "expect_column_values_to_be_in_set(in_inventory)" in failed
    assert result["failed_warnings"] == len(failed)
    # The gate re-run replaces its own rows and keeps GX's.
    _gate(config)
    assert _stored(db) == stored
    # One row per (day, suite, expectation), as fct_check_results documents: GX's coverage warning
    # (>= 0.9) was named as the gate's [0, 1] rule, so a join on the key paired the two
    con = duckdb.connect(db, read_only=True)
    try:
        assert con.execute("SELECT suite, expectation FROM fct_check_results WHERE day = ? GROUP BY ALL "
                           "HAVING count(*) > 1", [DAY]).fetchall() == []
    finally:
        con.close()
