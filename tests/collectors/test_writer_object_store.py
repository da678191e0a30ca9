"""The writer on an fsspec URL lake (`memory://` here; s3:// runs the same code in
tests/warehouse/test_object_store_lake.py): same layout, one object per partition file, no
temporary names left, replace keeps one version."""

from __future__ import annotations

import datetime as dt
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from joulehouse.collectors.writer import partition_files, replace_partition, write_dataset

UTC = dt.timezone.utc


def _rows(day: int, n: int, host: str = "node-01") -> pa.Table:
    base = dt.datetime(2026, 1, day, 23, 59, 58, tzinfo=UTC)
    return pa.Table.from_pylist([
        dict(sampled_at=base + dt.timedelta(seconds=i), host=host, gpu_index=0, gpu_uuid="GPU-0",
             gpu_model="NVIDIA H100 80GB HBM3", power_w=100.0 + i, source="nvml")
        for i in range(n)
    ])


@pytest.fixture()
def memory_lake():
    fsspec = pytest.importorskip("fsspec")
    url = f"memory://lake-{uuid.uuid4().hex[:8]}"
    yield url
    fsspec.filesystem("memory").rm(url.split("://", 1)[1], recursive=True)


def test_url_lake_gets_the_hive_layout_and_readable_files(memory_lake):
    import fsspec

    written = write_dataset(memory_lake, "gpu_samples", _rows(2, 4))  # crosses midnight
    folders = sorted(str(w.path).rsplit("/", 1)[0] for w in written)
    assert folders == [f"{memory_lake}/gpu_samples/date=2026-01-02/host=node-01",
                       f"{memory_lake}/gpu_samples/date=2026-01-03/host=node-01"]
    fs = fsspec.filesystem("memory")
    total = 0
    for w in written:
        with fs.open(w.path, "rb") as fh:
            table = pq.read_table(fh)
        assert table.num_rows == w.rows and fs.size(w.path) == w.bytes
        total += table.num_rows
    assert total == 4
    assert not [p for p in fs.find(memory_lake.split("://", 1)[1]) if not p.endswith(".parquet")]


def test_replace_partition_on_a_url_lake_keeps_only_the_new_file(memory_lake):
    replace_partition(memory_lake, "gpu_samples", "2026-01-05", "node-01", _rows(5, 1)[:1])
    first = partition_files(memory_lake, "gpu_samples", "2026-01-05", "node-01")
    new = replace_partition(memory_lake, "gpu_samples", "2026-01-05", "node-01", _rows(5, 1)[:1])
    after = partition_files(memory_lake, "gpu_samples", "2026-01-05", "node-01")
    assert len(first) == 1 and after == [new[0].path] and after != first
