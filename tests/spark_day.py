"""The simulated day both Spark parity tests run (tests/warehouse/test_spark_engine.py and
tests/dags/test_spark_engine_dag.py): 16 GPUs, one day at 30 s, with one column of the last
host's readings made NULL, so a fallback path (energy from power, a fit without clocks) runs on
both engines, and the first host's energy counter held over two readings (a counter read again
before it moved: fct_gpu_energy_hourly's repeat runs). Skips where Spark cannot run."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest


def simulated_day_without(lake: Path, day: dt.date, column: str) -> tuple[object, pa.Table]:
    """(the simulation's summary, its gpu_samples with `column` NULL on the last host's rows and
    the first host's counter held: each odd reading of a GPU repeats the one before); the lake
    itself is left as simulated. Skips the test without Java 17 or pyspark."""
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java 17 on PATH")
    pytest.importorskip("pyspark")
    from joulehouse.collectors.sim.simulate import simulate_fleet

    summary = simulate_fleet(lake, gpus=16, days=1, start=day, seed=5, interval_s=30.0)
    table = ds.dataset(lake / "gpu_samples", partitioning="hive").to_table().drop_columns(["date"])
    last_host = pc.equal(table.column("host"), max(table.column("host").to_pylist()))
    field = table.schema.field(column)
    emptied = pc.if_else(last_host, pa.nulls(table.num_rows, field.type), table.column(column))
    table = table.set_column(table.schema.get_field_index(column), field, emptied)
    return summary, _held_counter(table, min(table.column("host").to_pylist()))


def _held_counter(table: pa.Table, host: str) -> pa.Table:
    import polars as pl

    frame = pl.from_arrow(table).sort("gpu_uuid", "sampled_at")
    held = (pl.when((pl.col("host") == host) & (pl.int_range(pl.len()).over("gpu_uuid") % 2 == 1))
            .then(pl.col("energy_mj_total").shift(1).over("gpu_uuid"))
            .otherwise(pl.col("energy_mj_total")))
    return frame.with_columns(held.alias("energy_mj_total")).to_arrow().cast(table.schema)
