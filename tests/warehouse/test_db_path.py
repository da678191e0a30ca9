"""What `[warehouse] db_path` / `--db` may name: a DuckDB file, or a path for a new one."""

from __future__ import annotations

import pytest

from joulehouse.warehouse.db import WarehouseError, connect


@pytest.mark.parametrize("read_only", [False, True])
def test_a_data_file_is_refused_not_opened_as_an_in_memory_database(tmp_path, read_only):
    """DuckDB opens an existing CSV as an in-memory database with the CSV as a view: a build would
    have run in memory and kept nothing; a read-only open said 'Cannot launch in-memory database'."""
    inventory = tmp_path / "inventory.csv"
    inventory.write_text("gpu_uuid,host\nGPU-1,node-01\n")
    with pytest.raises(WarehouseError, match=r"inventory\.csv is not a DuckDB database"):
        connect(inventory, tmp_path / "lake", read_only=read_only)
    assert inventory.read_text() == "gpu_uuid,host\nGPU-1,node-01\n"


def test_a_folder_is_named_as_one(tmp_path):
    with pytest.raises(WarehouseError, match="is a folder"):
        connect(tmp_path, tmp_path / "lake")


def test_a_new_file_and_an_existing_warehouse_open(tmp_path):
    db = tmp_path / "w.duckdb"
    con = connect(db, tmp_path / "lake")
    con.execute("CREATE TABLE t AS SELECT 42 AS x")
    con.close()
    con = connect(db, None, read_only=True)
    assert con.execute("SELECT x FROM t").fetchone() == (42,)
    con.close()
