"""The warehouse on a small simulated fleet-day (collectors.sim): counter and integral agree."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from joulehouse.settings import WarehouseSettings
from joulehouse.collectors.writer import write_dataset
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.gate import run_gate
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 1, 2)
NOW = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    sim = pytest.importorskip("joulehouse.collectors.sim.simulate")
    root = tmp_path_factory.mktemp("sim")
    summary = sim.simulate_fleet(root / "lake", gpus=4, days=1, start=DAY, seed=7)
    settings = WarehouseSettings(inventory_path=str(summary.inventory_path))
    con = connect(root / "w.duckdb", root / "lake")
    build = build_day(con, DAY, settings, now=NOW)
    # The same readings without the energy counter: the warehouse must integrate power instead.
    table = ds.dataset(root / "lake" / "gpu_samples", partitioning="hive").to_table()
    table = table.drop_columns([c for c in ("date",) if c in table.column_names])
    table = table.set_column(table.schema.get_field_index("energy_mj_total"), "energy_mj_total",
                             pa.nulls(table.num_rows, pa.int64()))
    write_dataset(root / "lake_power_only", "gpu_samples", table)
    con_p = connect(root / "w_power.duckdb", root / "lake_power_only")
    build_day(con_p, DAY, settings, now=NOW)
    yield con, con_p, build, settings
    con.close()
    con_p.close()


@pytest.mark.slow
def test_counter_and_power_integral_agree_within_half_a_percent(simulated):
    con, con_p, _, _ = simulated
    q = "SELECT gpu_uuid, hour_at, energy_kwh, energy_source, coverage_ratio FROM fct_gpu_energy_hourly ORDER BY ALL"
    counter = {(r[0], r[1]): r for r in con.execute(q).fetchall()}
    power = {(r[0], r[1]): r for r in con_p.execute(q).fetchall()}
    assert counter.keys() == power.keys() and len(counter) == 4 * 24
    assert {r[3] for r in counter.values()} == {"counter"}
    assert {r[3] for r in power.values()} == {"power_integral"}
    for key, row in counter.items():
        assert power[key][2] == pytest.approx(row[2], rel=0.005), key
    total_c = sum(r[2] for r in counter.values())
    total_p = sum(r[2] for r in power.values())
    assert total_p == pytest.approx(total_c, rel=0.001)


@pytest.mark.slow
def test_simulated_day_is_whole_and_passes_blocking_checks(simulated):
    con, _, build, settings = simulated
    assert build.raw_gpu_rows == build.clean_gpu_rows + build.quarantined_gpu_rows == 4 * 86400
    assert build.inventory_found
    assert con.execute("SELECT bool_and(in_inventory) FROM stg_gpu_samples").fetchone()[0]
    rec = con.execute("SELECT min(residual_share), max(residual_share) FROM fct_node_reconciliation_hourly").fetchone()
    assert 0 < rec[0] <= rec[1] < 1  # the server draws more than its GPUs, never less
    pue = con.execute("SELECT min(pue), max(pue) FROM fct_pue_hourly").fetchone()
    assert 1.0 < pue[0] <= pue[1] < 3.0
    assert not run_gate(con, DAY, settings).failed_blocking
