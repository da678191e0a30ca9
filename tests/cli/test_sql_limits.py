"""`joulehouse sql` within its limits: a careless query (a cross join, a sort of billions of rows)
stops with one line naming the limit, instead of taking the memory, disk or hours of the host the
daily run shares; and its spill folder goes with the connection."""

from __future__ import annotations

import datetime as dt
import gc
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.writer import write_dataset
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.sqlrun import QueryError, open_read_only, run_query

DAY = dt.date(2026, 1, 2)
# About 3.6e9 pairs: tens of seconds on two cores when nothing stops it
CROSS_JOIN = "SELECT sum(a.range * b.range) FROM range(60000) a, range(60000) b"
# A sort of 30 M rows: about 0.5 GB to hold, so it must spill past a 64 MB limit
BIG_SORT = "SELECT max(r) FROM (SELECT row_number() OVER (ORDER BY hash(i)) AS r FROM range(30000000) t(i))"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("limits")
    t0 = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    write_dataset(root / "lake", "gpu_samples", pa.Table.from_pylist([
        dict(sampled_at=t0 + dt.timedelta(seconds=s), host="node-01", gpu_index=0, gpu_uuid="GPU-0",
             gpu_model="NVIDIA H200", power_w=300.0, source="nvml")
        for s in range(0, 600, 10)
    ]))
    con = connect(root / "warehouse.duckdb", root / "lake")
    build_day(con, DAY, WarehouseSettings(), now=dt.datetime(2026, 2, 1, tzinfo=dt.timezone.utc))
    con.close()
    return root / "warehouse.duckdb"


def _rows(con, sql: str) -> list[tuple]:
    return [row for batch in run_query(con, sql).batches for row in batch]


def test_a_query_past_its_time_is_stopped_with_one_line(warehouse):
    con = open_read_only(warehouse, WarehouseSettings(query_timeout_s=0.5))
    started = time.monotonic()
    with pytest.raises(QueryError, match=r"ran past \[warehouse\] query_timeout_s = 0.5 s"):
        _rows(con, CROSS_JOIN)
    assert time.monotonic() - started < 10
    # the connection stays usable, and an interrupt never reaches the next query
    assert _rows(con, "SELECT count(*) FROM stg_gpu_samples") == [(60,)]
    con.close()


def test_a_result_left_unfetched_does_not_stop_the_next_query(warehouse):
    con = open_read_only(warehouse, WarehouseSettings(query_timeout_s=1.0))
    run_query(con, "SELECT * FROM range(100000)")  # never fetched
    time.sleep(1.3)
    assert _rows(con, "SELECT count(*) FROM range(50000000)") == [(50000000,)]
    con.close()


def test_a_query_past_its_disk_is_stopped_and_names_the_setting(warehouse):
    small = WarehouseSettings(query_memory_limit="64MB", query_spill_limit="32MB")
    con = open_read_only(warehouse, small)
    with pytest.raises(QueryError, match=r"more than \[warehouse\] query_(spill|memory)_limit"):
        _rows(con, BIG_SORT)
    con.close()
    # the defaults let the same sort finish (it spills within them)
    con = open_read_only(warehouse)
    assert _rows(con, BIG_SORT) == [(30000000,)]
    con.close()


def test_the_spill_folder_goes_with_the_connection(warehouse, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    con = open_read_only(warehouse)
    (spill,) = tmp_path.glob("jh-sql-spill-*")
    (folder,) = con.execute("SELECT current_setting('temp_directory')").fetchone()
    assert Path(folder) == spill
    con.close()
    del con
    gc.collect()
    assert not spill.exists()


def test_the_cli_reads_the_limits_from_the_settings_file(warehouse, tmp_path):
    config = tmp_path / "joulehouse.toml"
    config.write_text("[warehouse]\nquery_timeout_s = 0.5\n")
    result = CliRunner().invoke(app, ["sql", CROSS_JOIN, "--db", str(warehouse), "--config", str(config)])
    assert result.exit_code == 2
    assert "query_timeout_s = 0.5 s" in result.output
    assert len(result.output.strip().splitlines()) == 1
