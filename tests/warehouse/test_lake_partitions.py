"""The per-host partition inspection the DAG maps over: counts, and bad files named."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from joulehouse.collectors.writer import write_dataset
from joulehouse.collectors.schema import DATASETS
from joulehouse.warehouse.lake_partitions import day_hosts, host_datasets, inspect_partition

DAY = dt.date(2026, 6, 10)


def _rows(host: str, n: int) -> pa.Table:
    t0 = dt.datetime(2026, 6, 10, 12, tzinfo=dt.timezone.utc)
    return pa.table({
        "sampled_at": pa.array([t0 + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "host": [host] * n, "gpu_index": [0] * n, "gpu_uuid": [f"GPU-{host}"] * n,
        "power_w": [300.0] * n, "source": ["nvml"] * n,
    })


def test_hosts_and_counts_and_a_corrupt_file_is_named(lake):
    write_dataset(lake, "gpu_samples", _rows("node-a", 5))
    write_dataset(lake, "gpu_samples", _rows("node-b", 3))
    assert day_hosts(lake, DAY) == ["node-a", "node-b"]
    assert day_hosts(lake, DAY + dt.timedelta(days=1)) == []
    assert host_datasets(lake, DAY, "node-a") == ["gpu_samples"] and host_datasets(lake, DAY, "node-z") == []
    t0 = dt.datetime(2026, 6, 10, 12, tzinfo=dt.timezone.utc)
    write_dataset(lake, "facility_samples", pa.table({
        "sampled_at": pa.array([t0], pa.timestamp("us", tz="UTC")), "site": ["site-a"],
        "facility_power_w": [1.2e5], "source": ["bms"]}))
    assert day_hosts(lake, DAY) == ["node-a", "node-b"], "GPU hosts only by default"
    assert day_hosts(lake, DAY, DATASETS) == ["node-a", "node-b", "site-a"]

    good = inspect_partition(lake, DAY, "node-a")
    assert (good.files, good.rows, good.unreadable, good.schema_mismatch) == (1, 5, [], [])

    broken = lake / "gpu_samples" / f"date={DAY}" / "host=node-b" / "part-broken.parquet"
    broken.write_bytes(b"PAR1 not really parquet")
    report = inspect_partition(lake, DAY, "node-b")
    assert report.rows == 3 and report.files == 2
    assert len(report.unreadable) == 1 and report.unreadable[0].startswith("part-broken.parquet")
