"""The Spark engine reads the inventory's hosts as the DuckDB build does: as the lake names a server
(collectors/sources/host_names.py). Starts PySpark local[1]."""

from __future__ import annotations

import pytest
from test_inventory_hosts import SPELLINGS, _inventory

from joulehouse.collectors.sources.host_names import canonical_host

pytestmark = [pytest.mark.slow, pytest.mark.integration,
              pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]


def test_the_spark_engine_reads_every_inventory_host_as_canonical_host_names_it(tmp_path):
    from joulehouse.warehouse import spark_engine

    # an empty cell: NULL on both engines, so that dim_gpu takes the lake's host (Spark's rows held '')
    hosts = {f"GPU-{i}": name for i, name in enumerate(SPELLINGS)} | {"GPU-empty": ""}
    settings = _inventory(tmp_path / "inventory.csv", hosts)
    spark = spark_engine.spark_session("local[1]")
    try:
        assert spark_engine.register_inventory(spark, settings)
        got = {r["gpu_uuid"]: r["host"] for r in spark.sql("SELECT gpu_uuid, host FROM int_inventory").collect()}
    finally:
        spark.stop()
    assert got == {uuid: canonical_host(name) or None for uuid, name in hosts.items()}
