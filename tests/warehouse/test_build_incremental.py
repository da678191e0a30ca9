"""A day's build replaces that day only and reads only the partitions it needs."""

from __future__ import annotations

import datetime as dt

import pytest
from warehouse_lakes import DAY, gpu_rows, write

from joulehouse.collectors.writer import partition_dir
from joulehouse.warehouse.build import BuildError, build_day
from joulehouse.warehouse.db import connect


@pytest.mark.slow
def test_rebuilding_a_day_replaces_exactly_that_day(lake, warehouse):
    write(lake, gpu_rows(range(-3600, 3600), 100.0))
    con = warehouse(day=DAY - dt.timedelta(days=1))
    warehouse(day=DAY)
    before = con.execute("SELECT day, count(*), sum(energy_kwh) FROM fct_gpu_energy_hourly GROUP BY day ORDER BY day").fetchall()
    warehouse(day=DAY)
    warehouse(day=DAY)
    after = con.execute("SELECT day, count(*), sum(energy_kwh) FROM fct_gpu_energy_hourly GROUP BY day ORDER BY day").fetchall()
    assert after == before and len(after) == 2
    assert con.execute("SELECT count(*) FROM stg_gpu_samples").fetchone()[0] == 7200


def test_a_day_does_not_open_partitions_of_other_days(lake, warehouse):
    write(lake, gpu_rows(range(0, 60), 100.0))
    # A file that cannot be read, five days later: a full-lake scan would fail on it.
    bad = partition_dir(lake, "gpu_samples", "2026-01-07", "node-01")
    bad.mkdir(parents=True)
    (bad / "part-broken.parquet").write_bytes(b"not parquet")
    con = warehouse()
    assert con.execute("SELECT count(*) FROM stg_gpu_samples").fetchone()[0] == 60


def test_a_failing_build_keeps_the_previous_rows(lake, tmp_path, warehouse):
    write(lake, gpu_rows(range(0, 60), 100.0))
    con = warehouse()
    bad = partition_dir(lake, "gpu_samples", str(DAY), "node-02")
    bad.mkdir(parents=True)
    (bad / "part-broken.parquet").write_bytes(b"not parquet")
    from joulehouse.settings import WarehouseSettings

    with pytest.raises(BuildError, match="int_gpu_samples_checked"):
        build_day(con, DAY, WarehouseSettings())
    assert con.execute("SELECT count(*) FROM stg_gpu_samples").fetchone()[0] == 60


def test_read_only_open_finds_the_lake_from_the_stored_path(lake, tmp_path, warehouse):
    write(lake, gpu_rows(range(0, 60), 100.0))
    warehouse().close()
    ro = connect(tmp_path / "warehouse.duckdb", None, read_only=True)
    assert ro.execute("SELECT count(*) FROM raw_gpu_samples").fetchone()[0] == 60
    ro.close()
