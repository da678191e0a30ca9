"""The raw_* views read the lake's contract columns by name, so files that carry a source's own
extra columns (NVML's device limits, running PIDs, read errors) sit beside files that do not,
as on a node running NVML and DCGM, and the day still builds."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa

from joulehouse.collectors.schema import DATASETS
from joulehouse.settings import WarehouseSettings
from joulehouse.collectors.sources.nvml import ROW_SCHEMA as NVML_ROW_SCHEMA
from joulehouse.collectors.writer import write_dataset
from joulehouse.warehouse.build import build_day, ensure_views
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 4, 1)
T0 = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)


def _rows(host: str, source: str, n: int = 60) -> list[dict]:
    return [dict(sampled_at=T0 + dt.timedelta(seconds=10 * i), host=host, gpu_index=0, gpu_uuid=f"GPU-{host}-{source}",
                 gpu_model="NVIDIA H100 80GB HBM3", power_w=300.0 + i, source=source) for i in range(n)]


def test_nvml_files_with_extras_beside_dcgm_files_build(tmp_path):
    lake = tmp_path / "lake"
    extras = [f.name for f in NVML_ROW_SCHEMA if f.name not in DATASETS["gpu_samples"].names]
    assert extras, "the NVML source writes columns of its own"
    nvml = _rows("node-a", "nvml")
    for r in nvml:
        r.update(power_limit_min_w=200.0, power_limit_max_w=700.0, power_limit_default_w=700.0, running_pids=[42],
                 error=None)
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(nvml, schema=NVML_ROW_SCHEMA))
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(_rows("node-a", "dcgm")))  # same partition
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(_rows("node-b", "dcgm")))

    con = connect(tmp_path / "w.duckdb", lake)
    ensure_views(con)
    assert con.execute("SELECT count(*), count(power_w) FROM raw_gpu_samples").fetchone() == (180, 180)
    built = build_day(con, DAY, WarehouseSettings(), now=T0 + dt.timedelta(days=2))
    assert built.raw_gpu_rows == 180
    assert con.execute("SELECT count(DISTINCT gpu_uuid) FROM fct_gpu_energy_hourly WHERE day = ?", [DAY]).fetchone() == (3,)


def _one_row(schema: pa.Schema) -> pa.Table:
    """One row with a value in each required column (the writer fills the rest with NULL)."""
    sample = {pa.types.is_timestamp: T0, pa.types.is_string: "x", pa.types.is_integer: 1, pa.types.is_floating: 1.0}
    row = {f.name: next(v for test, v in sample.items() if test(f.type)) for f in schema if not f.nullable}
    if "host" not in row and "site" not in row:
        row["host"] = "node-a"
    return pa.Table.from_pylist([row])


def test_each_raw_view_reads_exactly_the_datasets_columns_from_files(tmp_path, lake):
    for dataset, schema in DATASETS.items():
        write_dataset(lake, dataset, _one_row(schema))
    con = connect(tmp_path / "w.duckdb", lake)
    ensure_views(con)
    for dataset, schema in DATASETS.items():
        columns = [row[0] for row in con.execute(f"DESCRIBE raw_{dataset}").fetchall()]
        assert columns == [*schema.names, "date"], dataset
        assert con.execute(f"SELECT count(*) FROM raw_{dataset}").fetchone() == (1,), "read from the file, not a stand-in"


def test_a_plain_duckdb_session_reads_the_raw_views_without_setting_the_lake(tmp_path):
    """The README's `duckdb -readonly warehouse.duckdb`: no jh_lake variable is set there, and the
    raw views read the lake the build read (they failed with "read_parquet reader cannot take NULL
    input" before); a connection that sets jh_lake still reads the lake it names."""
    lake, other = tmp_path / "it's a lake", tmp_path / "other"  # a quote in the path, as a user's may have
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(_rows("node-a", "nvml", n=60)))
    write_dataset(other, "gpu_samples", pa.Table.from_pylist(_rows("node-b", "nvml", n=7)))
    con = connect(tmp_path / "w.duckdb", lake)
    build_day(con, DAY, WarehouseSettings(), now=T0 + dt.timedelta(days=2))
    con.close()

    plain = duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True)
    assert plain.execute("SELECT getvariable('jh_lake')").fetchone() == (None,)
    assert plain.execute("SELECT count(*), min(host) FROM raw_gpu_samples").fetchone() == (60, "node-a")
    assert plain.execute("SELECT count(*) FROM raw_node_samples").fetchone() == (0,)  # a dataset the lake lacks
    plain.execute("SET VARIABLE jh_lake = ?", [str(other.resolve())])
    assert plain.execute("SELECT count(*), min(host) FROM raw_gpu_samples").fetchone() == (7, "node-b")
