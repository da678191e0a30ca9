"""The simulated day both Spark parity tests run (tests/warehouse/test_spark_engine.py and
tests/dags/test_spark_engine_dag.py): 16 GPUs, one day at 30 s, with one column of the last
host's readings made NULL, so a fallback path (energy from power, a fit without clocks) runs on
both engines. Skips where Spark cannot run."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest


def simulated_day_without(lake: Path, day: dt.date, column: str) -> tuple[object, pa.Table]:
    """(the simulation's summary, its gpu_samples with `column` NULL on the last host's rows);
    the lake itself is left as simulated. Skips the test without Java 17 or pyspark."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 on PATH")
    pytest.importorskip("pyspark")
    from joulehouse.collectors.sim.simulate import simulate_fleet

    summary = simulate_fleet(lake, gpus=16, days=1, start=day, seed=5, interval_s=30.0)
    table = ds.dataset(lake / "gpu_samples", partitioning="hive").to_table().drop_columns(["date"])
    last_host = pc.equal(table.column("host"), max(table.column("host").to_pylist()))
    field = table.schema.field(column)
    emptied = pc.if_else(last_host, pa.nulls(table.num_rows, field.type), table.column(column))
    return summary, table.set_column(table.schema.get_field_index(column), field, emptied)
