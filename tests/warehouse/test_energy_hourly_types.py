"""fct_gpu_energy_hourly's column types are the ones both engines write (spark_engine's schema):
the host hand-over summed n_samples into a HUGEINT, so a warehouse built on DuckDB and one built on
Spark differed, which only the Spark test (it needs Java) would see."""

from __future__ import annotations

from warehouse_lakes import gpu_rows, write

from joulehouse.warehouse.spark_engine import FCT_GPU_ENERGY_HOURLY_SCHEMA


def test_the_hourly_energy_has_the_documented_types(lake, warehouse):
    write(lake, gpu_rows(range(0, 7200, 5), 150.0))
    write(lake, gpu_rows(range(0, 7200, 5), 150.0, uuid="GPU-1", host="node-02", counter_mj=lambda t: int(t * 150_000)))
    con = warehouse()
    frame = con.sql("SELECT * FROM fct_gpu_energy_hourly").pl()
    assert frame.height == 4
    assert dict(frame.schema) == FCT_GPU_ENERGY_HOURLY_SCHEMA
