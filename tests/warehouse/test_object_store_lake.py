"""The lake on object storage: the simulator writes a fleet-day to s3:// (moto's server on
127.0.0.1) through the writer, the warehouse builds the day over it through DuckDB + fsspec, and
every number matches the same fleet-day on local disk."""

from __future__ import annotations

import math

import datetime as dt

import pytest

from joulehouse.collectors.schema import DATASETS
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

from s3_server import local_s3

DAY = dt.date(2026, 1, 2)
NOW = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
BUCKET = "jh-lake"
SIM = dict(gpus=8, days=1, start=DAY, seed=11, interval_s=10.0)


@pytest.fixture(scope="module")
def both_lakes(tmp_path_factory):
    from joulehouse.collectors.sim.simulate import simulate_fleet

    root = tmp_path_factory.mktemp("s3lake")
    local = simulate_fleet(root / "local" / "lake", **SIM)
    con_local = connect(root / "local.duckdb", root / "local" / "lake")
    build_local = build_day(con_local, DAY, WarehouseSettings(inventory_path=str(local.inventory_path)), now=NOW)
    with local_s3(BUCKET):
        remote = simulate_fleet(f"s3://{BUCKET}/lake", **SIM)
        con_s3 = connect(root / "s3.duckdb", f"s3://{BUCKET}/lake")
        build_s3 = build_day(con_s3, DAY, WarehouseSettings(inventory_path=str(remote.inventory_path)), now=NOW)
        yield dict(local=(local, con_local, build_local), s3=(remote, con_s3, build_s3))
        con_s3.close()
    con_local.close()


@pytest.mark.integration
def test_simulator_writes_the_same_layout_to_s3(both_lakes):
    local, _, _ = both_lakes["local"]
    remote, _, _ = both_lakes["s3"]
    assert remote.rows == local.rows
    assert all(str(p).startswith(f"s3://{BUCKET}/lake/") for p in remote.files)
    rel_local = sorted(str(p).split("/lake/", 1)[1].rsplit("/", 1)[0] for p in local.files)
    rel_s3 = sorted(str(p).split("/lake/", 1)[1].rsplit("/", 1)[0] for p in remote.files)
    assert rel_s3 == rel_local  # same dataset/date=/host= folders
    assert str(remote.inventory_path) == f"s3://{BUCKET}/inventory.csv"


@pytest.mark.integration
def test_warehouse_day_over_s3_matches_local_disk(both_lakes):
    simulated, con_local, build_local = both_lakes["local"]
    _, con_s3, build_s3 = both_lakes["s3"]
    assert build_s3.raw_gpu_rows == build_local.raw_gpu_rows == 8 * 8640
    assert build_s3.inventory_found and build_local.inventory_found
    # The datasets the simulator does not write (the collector's process map, the agent's audit).
    not_simulated = tuple(d for d in DATASETS if not simulated.rows.get(d))
    assert not_simulated == ("gpu_processes", "agent_audit")
    assert build_s3.missing_datasets == build_local.missing_datasets == not_simulated
    assert build_s3.rows == build_local.rows
    q = ("SELECT hour_at, gpu_uuid, gpu_model, energy_kwh, coverage_ratio, energy_source "
         "FROM fct_gpu_energy_hourly WHERE day = ? ORDER BY gpu_uuid, hour_at")
    local_rows = con_local.execute(q, [DAY]).fetchall()
    s3_rows = con_s3.execute(q, [DAY]).fetchall()
    assert len(local_rows) == 8 * 24
    _assert_same_rows(s3_rows, local_rows)
    for table in ("fct_node_energy_hourly", "fct_pue_hourly", "dim_gpu"):
        a = con_local.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        b = con_s3.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall()
        assert a, table
        _assert_same_rows(b, a)


def _assert_same_rows(got: list[tuple], expected: list[tuple]) -> None:
    """Equal rows, floats to 1e-12 relative: parallel sums may add in another order."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert len(g) == len(e)
        for x, y in zip(g, e):
            if isinstance(x, float) and isinstance(y, float):
                assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-15), (g, e)
            else:
                assert x == y, (g, e)


def _lake_of(result) -> str:
    first = str(result.files[0])
    return first.split("/lake/", 1)[0] + "/lake"


@pytest.mark.integration
def test_the_dags_per_host_listing_reads_the_s3_lake_like_local_disk(both_lakes):
    """The daily DAG maps its per-host task over this listing: on an object-store lake it used to
    find no host, so every later step was skipped and the run still said success."""
    from joulehouse.collectors.schema import DATASETS
    from joulehouse.warehouse.lake_partitions import NoReadingsForDay, day_hosts, gpu_hosts_or_raise, host_datasets, inspect_partition

    local, s3 = _lake_of(both_lakes["local"][0]), _lake_of(both_lakes["s3"][0])
    assert s3.startswith("s3://")
    hosts = day_hosts(local, DAY, DATASETS)
    assert hosts and day_hosts(s3, DAY, DATASETS) == hosts
    assert gpu_hosts_or_raise(s3, DAY) == day_hosts(local, DAY)
    for host in hosts:
        datasets = host_datasets(local, DAY, host)
        assert datasets and host_datasets(s3, DAY, host) == datasets
        for dataset in datasets:
            a, b = inspect_partition(local, DAY, host, dataset), inspect_partition(s3, DAY, host, dataset)
            assert (b.files, b.rows, b.unreadable, b.schema_mismatch) == (a.files, a.rows, [], [])
            assert a.rows > 0
    with pytest.raises(NoReadingsForDay, match="no GPU readings for 2026-01-09"):
        gpu_hosts_or_raise(s3, dt.date(2026, 1, 9))
