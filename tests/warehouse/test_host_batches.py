"""Host batches of the build: bounded batches, a GPU's readings never split, and the same rows
whatever the batch size."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from warehouse_lakes import DAY, gpu_rows, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.host_batches import group_hosts

RELATIONS = ("stg_gpu_samples", "quarantine_gpu_samples", "fct_gpu_energy_hourly", "fct_gpu_coverage_daily", "dim_gpu")


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 12)), max_size=30), st.integers(1, 4))
def test_batches_cover_every_host_once_and_keep_a_gpus_hosts_together(pairs, size):
    hosts = [f"h{i}" for i in range(10)]
    host_gpus = [(f"h{h}", f"g{g}") for h, g in pairs]
    batches = group_hosts(host_gpus, hosts, size)
    flat = [h for b in batches for h in b]
    assert sorted(flat) == sorted(hosts)
    batch_of = {h: i for i, b in enumerate(batches) for h in b}
    for gpu in {g for _, g in host_gpus}:
        assert len({batch_of[h] for h, g in host_gpus if g == gpu}) == 1
    shared = {h for h, g in host_gpus if sum(1 for _, g2 in host_gpus if g2 == g) > 1}
    for b in batches:  # only a group of hosts sharing GPUs may exceed the size
        assert len(b) <= size or set(b) <= shared | set(b[:1])


@given(st.lists(st.integers(0, 5000), min_size=1, max_size=12), st.integers(1, 6000))
def test_batches_hold_at_most_the_readings_bound_unless_one_host_alone_exceeds_it(readings, bound):
    hosts = [f"h{i:02d}" for i in range(len(readings))]
    per_host = dict(zip(hosts, readings))
    batches = group_hosts([], hosts, 64, per_host, bound)
    assert [h for b in batches for h in b] == hosts  # every host once, in order
    for b in batches:
        assert sum(per_host[h] for h in b) <= bound or len(b) == 1
    for a, b in zip(batches, batches[1:]):  # a batch closes only when the next host would not fit
        assert sum(per_host[h] for h in a) + per_host[b[0]] > bound


def test_a_day_of_few_readings_per_host_is_one_batch_and_a_full_one_is_split_by_readings(lake, tmp_path):
    """Batches are counted from the files' footers: three hosts of 720, 720 and 1,440 readings."""
    from joulehouse.warehouse.build import ensure_views
    from joulehouse.warehouse.db import connect
    from joulehouse.warehouse.host_batches import host_batches

    for host, step in (("node-01", 10), ("node-02", 10), ("node-03", 5)):
        write(lake, gpu_rows(range(0, 7200, step), 100.0, uuid=f"GPU-{host}", host=host))
    con = connect(tmp_path / "w.duckdb", lake)
    ensure_views(con)
    files = sorted(str(p) for p in (lake / "gpu_samples").rglob("*.parquet"))
    assert host_batches(con, DAY, 900.0, 64, 3000, files) == [["node-01", "node-02", "node-03"]]
    assert host_batches(con, DAY, 900.0, 64, 1500, files) == [["node-01", "node-02"], ["node-03"]]
    assert host_batches(con, DAY, 900.0, 1, 3000, files) == [["node-01"], ["node-02"], ["node-03"]]
    con.close()


def _snapshot(con):
    return {rel: sorted(con.execute(f"SELECT * FROM {rel}").fetchall(), key=repr) for rel in RELATIONS}


@pytest.mark.slow
def test_the_day_is_the_same_built_one_host_at_a_time(lake, warehouse, tmp_path):
    # Four hosts; GPU-MOVED is read on node-02 in the morning and node-03 from 10:00 (swapped
    # servers), plus a duplicate row and a quarantined one.
    rows = []
    for n in (1, 2, 3, 4):
        rows += gpu_rows(range(0, 7200, 5), 100.0 + n, uuid=f"GPU-{n}", host=f"node-0{n}",
                         counter_mj=lambda t, n=n: int(t * (100.0 + n) * 1000))
    # Power that is no whole number of joules per step, at uneven steps: the sums of its pieces
    # depend on the order of addition unless the build makes them exact.
    def moved_power(t):
        return 200.0 + 13.7 * math.sin(t / 61.0)

    uneven = [t + 0.37 * (t % 3) for t in range(0, 50000, 10)]
    rows += gpu_rows([t for t in uneven if t < 36000], moved_power, uuid="GPU-MOVED", host="node-02")
    rows += gpu_rows([t for t in uneven if t >= 36000], moved_power, uuid="GPU-MOVED", host="node-03")
    rows += [rows[7], dict(rows[9], power_w=-5.0, sampled_at=rows[9]["sampled_at"].replace(microsecond=5))]
    write(lake, rows)
    whole = _snapshot(warehouse())
    one_by_one = dataclasses.replace(WarehouseSettings(), build_hosts_per_batch=1)
    batched = _snapshot(warehouse(settings=one_by_one))
    assert batched == whole
    by_readings = dataclasses.replace(WarehouseSettings(), build_readings_per_batch=2000)  # about a host each
    assert _snapshot(warehouse(settings=by_readings)) == whole
    moved = [r for r in whole["fct_gpu_energy_hourly"] if r[3] == "GPU-MOVED"]  # (hour_at, day, host, gpu_uuid, ...)
    assert len(moved) == 14 and len({r[0] for r in moved}) == 14  # one row per hour, read by two hosts
    assert len(whole["quarantine_gpu_samples"]) == 2


@pytest.mark.parametrize("hosts_per_batch", [1, 100])
def test_host_folders_another_writer_named_are_read_decoded_or_quarantined_never_lost(lake, warehouse, hosts_per_batch):
    """Spark and pyarrow percent-encode a partition value (host=fd00%3A%3A7); an empty host= folder
    and Hive's NULL folder name no host. The batches took the folders' raw names and the rows (whose
    host DuckDB decodes from the folder) matched none: 8,640 of 17,280 readings read, none quarantined."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write(lake, gpu_rows(range(0, 600, 10), 100.0))
    folders = {"fd00%3A%3A7": "GPU-v6", "": "GPU-empty", "__HIVE_DEFAULT_PARTITION__": "GPU-null"}
    for folder, uuid in folders.items():
        path = lake / "gpu_samples" / f"date={DAY}" / f"host={folder}" / "part-0.parquet"
        path.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(gpu_rows(range(0, 600, 10), 100.0, uuid=uuid, host="as-written")), path)
    con = warehouse(settings=WarehouseSettings(build_hosts_per_batch=hosts_per_batch))
    clean = con.execute("SELECT gpu_uuid, host, count(*) FROM stg_gpu_samples GROUP BY ALL ORDER BY 1").fetchall()
    assert clean == [("GPU-0", "node-01", 60), ("GPU-v6", "fd00::7", 60)]
    quarantined = con.execute("SELECT gpu_uuid, reason, count(*) FROM quarantine_gpu_samples GROUP BY ALL ORDER BY 1").fetchall()
    assert quarantined == [("GPU-empty", "key_missing", 60), ("GPU-null", "key_missing", 60)]
    assert con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE host = 'fd00::7'").fetchone()[0] > 0
