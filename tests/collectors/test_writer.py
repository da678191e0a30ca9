"""The lake round trip: what the writer puts down, DuckDB, polars and pyarrow read back."""

from __future__ import annotations

import datetime as dt

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from joulehouse.collectors.schema import GPU_SAMPLES, RATIO_STEP, STORAGE_STEP_BY_DATASET, SchemaError, conform
from joulehouse.collectors.writer import TMP_SUFFIX, replace_partition, write_dataset

T0 = dt.datetime(2026, 3, 1, 23, 59, 58, tzinfo=dt.timezone.utc)


def _samples(n: int, host: str = "node-a", uuid: str = "GPU-0000") -> pa.Table:
    return pa.table(
        {
            "sampled_at": pa.array([T0 + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("us", tz="UTC")),
            "host": [host] * n,
            "gpu_index": [0] * n,
            "gpu_uuid": [uuid] * n,
            "gpu_model": ["NVIDIA H100 80GB HBM3"] * n,
            "power_w": [100.123 + i for i in range(n)],
            "energy_mj_total": [1_000_000 + 100_123 * i for i in range(n)],
            "temp_c": [None if i == 1 else 40.0 for i in range(n)],
            "source": ["sim"] * n,
        }
    )


def test_round_trip_splits_days_and_reads_back_in_three_engines(lake):
    written = write_dataset(lake, "gpu_samples", _samples(4))
    assert sorted(str(w.path.relative_to(lake)).split("/part-")[0] for w in written) == [
        "gpu_samples/date=2026-03-01/host=node-a",
        "gpu_samples/date=2026-03-02/host=node-a",
    ]
    glob = f"{lake}/gpu_samples/**/*.parquet"
    rows = duckdb.sql(
        f"SELECT date, sampled_at, power_w, temp_c, energy_mj_total FROM read_parquet('{glob}', hive_partitioning=true) ORDER BY sampled_at"
    ).fetchall()
    assert [r[0] for r in rows] == [dt.date(2026, 3, 1)] * 2 + [dt.date(2026, 3, 2)] * 2
    assert rows[0][1] == T0
    assert rows[3][2] == pytest.approx(103.123, abs=1e-4)  # float32 keeps mW precision
    assert rows[1][3] is None  # missing stays NULL, not 0
    assert [r[4] for r in rows] == [1_000_000 + 100_123 * i for i in range(4)]
    frame = pl.read_parquet(glob, hive_partitioning=True)
    assert frame.height == 4 and frame["temp_c"].null_count() == 1
    table = ds.dataset(lake / "gpu_samples", format="parquet", partitioning="hive").to_table()
    assert table.num_rows == 4
    assert pq.read_schema(written[0].path).field("sampled_at").type == pa.timestamp("us", tz="UTC")


def test_files_use_telemetry_encodings(lake):
    (written,) = write_dataset(lake, "gpu_samples", _samples(1))
    meta = pq.ParquetFile(written.path).metadata
    columns = {meta.row_group(0).column(i).path_in_schema: meta.row_group(0).column(i) for i in range(meta.num_columns)}
    assert columns["sampled_at"].compression == "ZSTD"
    assert "DELTA_BINARY_PACKED" in columns["energy_mj_total"].encodings
    assert "BYTE_STREAM_SPLIT" in columns["power_w"].encodings


def test_pcie_rates_are_byte_stream_split_and_read_back_exactly(lake):
    rates = [1024 * k for k in (7, 980_000, 3, 4_000_000)]
    written = write_dataset(lake, "gpu_samples", _samples(4).append_column("pcie_rx_bytes_per_s", pa.array(rates)))
    meta = pq.ParquetFile(written[0].path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "BYTE_STREAM_SPLIT" in encodings["pcie_rx_bytes_per_s"]
    glob = f"{lake}/gpu_samples/**/*.parquet"
    read_back = duckdb.sql(f"SELECT pcie_rx_bytes_per_s FROM read_parquet('{glob}') ORDER BY sampled_at").fetchall()
    assert [r[0] for r in read_back] == rates
    assert pl.read_parquet(glob)["pcie_rx_bytes_per_s"].sort().to_list() == sorted(rates)


ratios = st.lists(st.one_of(st.none(), st.floats(0.0, 1.0, width=32)), min_size=1, max_size=50)


@given(ratios)
def test_dcgm_ratios_are_stored_within_half_a_step_and_rounding_twice_changes_nothing(values):
    table = _samples(len(values)).append_column("sm_active_ratio", pa.array(values, pa.float32()))
    stored = conform("gpu_samples", table)["sm_active_ratio"].to_pylist()
    assert conform("gpu_samples", conform("gpu_samples", table))["sm_active_ratio"].to_pylist() == stored
    for raw, kept in zip(values, stored):
        if raw is None:
            assert kept is None  # a missing reading stays missing
            continue
        assert abs(kept - raw) <= RATIO_STEP / 2
        assert (kept / RATIO_STEP).is_integer()  # an exact float32: its low mantissa bits are zero
        assert 0.0 <= kept <= 1.0


def test_only_the_dcgm_ratios_are_narrowed():
    assert set(STORAGE_STEP_BY_DATASET) == {"gpu_samples"}
    assert {n for n in STORAGE_STEP_BY_DATASET["gpu_samples"]} == {
        n for n in GPU_SAMPLES.names if n.endswith("_ratio")}
    assert RATIO_STEP / 2 < 1e-5
    row = conform("gpu_samples", _samples(1)).to_pylist()[0]
    assert row["power_w"] == pytest.approx(100.123, abs=1e-4)  # NVML's mW kept


def test_no_temporary_file_is_left_and_replace_keeps_one_version(lake):
    replace_partition(lake, "gpu_samples", "2026-03-01", "node-a", _samples(2))
    replace_partition(lake, "gpu_samples", "2026-03-01", "node-a", _samples(2))
    folder = lake / "gpu_samples" / "date=2026-03-01" / "host=node-a"
    assert len(list(folder.glob("*.parquet"))) == 1
    assert not list(lake.rglob(f"*{TMP_SUFFIX}"))


def test_schema_errors_name_the_column():
    bad = _samples(2).drop_columns(["gpu_uuid"])
    with pytest.raises(SchemaError, match="gpu_uuid"):
        conform("gpu_samples", bad)
    wrong = _samples(2).set_column(5, "power_w", pa.array(["a", "b"]))
    with pytest.raises(SchemaError, match="power_w"):
        conform("gpu_samples", wrong)
    assert conform("gpu_samples", _samples(2)).schema.names[: len(GPU_SAMPLES)] == GPU_SAMPLES.names


def test_new_partition_folders_are_made_durable_in_their_parents(lake, monkeypatch):
    """A file fsynced into a folder whose own name was never fsynced can vanish in a power cut:
    each folder the writer creates is fsynced into its parent, then the file into its folder."""
    import os

    from joulehouse.collectors import writer

    synced: list[str] = []
    real = os.fsync
    monkeypatch.setattr(writer.os, "fsync", lambda fd: (synced.append(os.readlink(f"/proc/self/fd/{fd}")), real(fd)))
    lake.mkdir(parents=True, exist_ok=True)
    [written] = write_dataset(lake, "gpu_samples", _samples(1))
    partition = written.path.parent
    folders = [p for p in synced if not p.endswith(".parquet.tmp")]
    assert folders == [str(lake.resolve()), str((lake / "gpu_samples").resolve()), str(partition.parent.resolve()),
                       str(partition.resolve())]
    assert synced.index(next(p for p in synced if p.endswith(".parquet.tmp"))) == 3  # the file, before its folder


def test_a_link_planted_in_the_lake_is_never_followed(lake, tmp_path):
    """The node agent writes its audit as root into the lake the collector's user owns: a partition
    folder replaced by a link to a folder of root's must stop the write, not redirect it."""
    from joulehouse.collectors.writer import LakeWriteError

    elsewhere = tmp_path / "root-only"
    elsewhere.mkdir()
    (lake / "gpu_samples" / "date=2026-03-01").mkdir(parents=True)
    (lake / "gpu_samples" / "date=2026-03-01" / "host=node-a").symlink_to(elsewhere)
    with pytest.raises(LakeWriteError, match="symbolic link"):
        write_dataset(lake, "gpu_samples", _samples(1))
    assert list(elsewhere.iterdir()) == []
