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


@pytest.mark.parametrize("query", ["SELECT 1 AS one", "SELECT * FROM no_such_relation"])
def test_the_cli_deletes_its_spill_folder_when_its_query_ends(warehouse, tmp_path, monkeypatch, query):
    """The folder went only when the connection was collected: a full test run left 75 behind in
    /tmp, its exit running no finalizer. The command now deletes it as it closes the connection."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    was_enabled = gc.isenabled()
    gc.disable()  # what a process whose finalizers never run sees
    try:
        CliRunner().invoke(app, ["sql", query, "--db", str(warehouse)])
        assert not list(tmp_path.glob("jh-sql-spill-*"))
    finally:
        if was_enabled:
            gc.enable()


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


def test_memory_duckdb_does_not_count_is_capped_too(warehouse):
    """An analyst's trial: `repeat('x', 3e9)` is one string outside DuckDB's buffers, so the 1 GB
    query_memory_limit let the process take 6 GB of the host. The command caps its data."""
    import resource

    before = resource.getrlimit(resource.RLIMIT_DATA)
    result = CliRunner().invoke(app, ["sql", "SELECT length(repeat('x', 3000000000))", "--db", str(warehouse)])
    assert result.exit_code == 2, result.output
    assert "more than [warehouse] query_memory_limit" in " ".join(result.output.split())
    assert resource.getrlimit(resource.RLIMIT_DATA) == before, "the process's limit is given back"
    # a query within its limits still answers
    ok = CliRunner().invoke(app, ["sql", "SELECT count(*) AS n FROM range(20000000)", "--db", str(warehouse),
                                  "--format", "csv"])
    assert ok.exit_code == 0 and ok.output.splitlines() == ["n", "20000000"]


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_a_stopped_query_says_so_in_one_line_and_leaves_no_spill_folder(warehouse, tmp_path, signal_name):
    """Ctrl-C printed 37 lines of traceback; a kill left /tmp/jh-sql-spill-* behind each time, and so
    did a closed terminal or a dropped ssh session (SIGHUP: 811 MB, review helper-87)."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "joulehouse", "sql", CROSS_JOIN, "--db", str(warehouse)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("jh-sql-spill-*")) and time.monotonic() < deadline:
        time.sleep(0.05)  # the connection is open: the query runs
    time.sleep(0.5)
    proc.send_signal(getattr(signal, signal_name))
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "error: interrupted; the query was stopped"
    assert not list(tmp_path.glob("jh-sql-spill-*"))


def test_csv_has_unix_line_ends_and_json_is_strict(warehouse):
    import json

    query = "SELECT 1 AS a, 'NaN'::DOUBLE AS nan, 'inf'::DOUBLE AS inf, '-inf'::DOUBLE AS minus, NULL AS missing"
    csv_out = CliRunner().invoke(app, ["sql", query, "--db", str(warehouse), "--format", "csv"]).stdout_bytes
    assert b"\r" not in csv_out and csv_out.startswith(b"a,nan,inf,minus,missing\n")
    json_out = CliRunner().invoke(app, ["sql", query, "--db", str(warehouse), "--format", "json"]).output

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    assert json.loads(json_out, parse_constant=refuse) == [
        {"a": 1, "nan": "NaN", "inf": "Infinity", "minus": "-Infinity", "missing": None}]


def test_nested_values_are_json_in_both_formats(warehouse):
    """A map keyed by dates (histogram) stopped --format json half-written with a traceback, a NaN in
    a list too, and csv printed Python's repr ({datetime.date(2026, 1, 2): 24})."""
    import json

    query = ("SELECT map([DATE '2026-01-02'], [24]) AS days, ['NaN'::DOUBLE, 1.5] AS l, "
             "{'t': TIMESTAMPTZ '2026-01-02 00:00:00+00', 'x': 'inf'::DOUBLE} AS s")
    result = CliRunner().invoke(app, ["sql", query, "--db", str(warehouse), "--format", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output) == [
        {"days": {"2026-01-02": 24}, "l": ["NaN", 1.5], "s": {"t": "2026-01-02 00:00:00+00:00", "x": "Infinity"}}]
    csv_out = CliRunner().invoke(app, ["sql", query, "--db", str(warehouse), "--format", "csv"]).output
    assert csv_out.splitlines()[1] == ('"{""2026-01-02"": 24}","[""NaN"", 1.5]",'
                                       '"{""t"": ""2026-01-02 00:00:00+00:00"", ""x"": ""Infinity""}"')


def test_json_keeps_every_column_when_two_share_a_name(warehouse):
    """`SELECT 1 AS a, 2 AS a` printed {"a": 2}: a join's two `host` columns lost one silently."""
    import json

    query = "SELECT 1 AS a, 2 AS a, 3 AS a_2, 4 AS a"
    out = CliRunner().invoke(app, ["sql", query, "--db", str(warehouse), "--format", "json"]).output
    assert json.loads(out) == [{"a": 1, "a_2": 2, "a_2_2": 3, "a_3": 4}]


def test_without_db_the_settings_warehouse_is_queried(warehouse, tmp_path, monkeypatch):
    """The README's commands take --config or JOULEHOUSE_CONFIG for the site; `sql` said
    '--db FILE is required' though the settings name the warehouse."""
    from typer.testing import CliRunner

    from joulehouse.cli.main import app

    site = tmp_path / "site.toml"
    site.write_text(f'[warehouse]\ndb_path = "{warehouse}"\n')
    monkeypatch.delenv("JOULEHOUSE_CONFIG", raising=False)
    by_option = CliRunner().invoke(app, ["sql", "SELECT count(*) FROM stg_gpu_samples", "--config", str(site),
                                         "--format", "csv"])
    assert by_option.exit_code == 0 and by_option.output.splitlines()[-1] == "60"
    monkeypatch.setenv("JOULEHOUSE_CONFIG", str(site))
    by_variable = CliRunner().invoke(app, ["sql", "SELECT count(*) FROM stg_gpu_samples", "--format", "csv"])
    assert by_variable.exit_code == 0 and by_variable.output.splitlines()[-1] == "60"
    monkeypatch.delenv("JOULEHOUSE_CONFIG")
    neither = CliRunner().invoke(app, ["sql", "SELECT 1"])
    assert neither.exit_code == 2 and "give --db FILE, or --config (or JOULEHOUSE_CONFIG)" in neither.output


def _chained_ctes(n: int) -> str:
    """n CTEs, each reading the one before twice: DuckDB binds and plans 2^n branches before it
    runs one, and neither step polls for an interrupt."""
    ctes = ["t0 AS NOT MATERIALIZED (SELECT 1 AS x)"] + [
        f"t{i} AS NOT MATERIALIZED (SELECT * FROM t{i - 1} UNION ALL SELECT * FROM t{i - 1})" for i in range(1, n)]
    return "WITH " + ", ".join(ctes) + f" SELECT count(*) FROM t{n - 1}"


def test_a_query_the_interrupt_cannot_reach_still_ends_at_its_time(warehouse, tmp_path):
    """23 chained CTEs ran 17.6 s under a 1 s limit and took 2.6 GB before the memory cap ended
    them: the timer's interrupt never reached DuckDB's binder and optimizer. The command now ends
    itself HARD_STOP_GRACE_S after the limit, with the same one line and no spill folder left."""
    import os
    import subprocess
    import sys

    from joulehouse.cli.query_process import HARD_STOP_GRACE_S

    config = tmp_path / "joulehouse.toml"
    config.write_text("[warehouse]\nquery_timeout_s = 1.0\n")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "joulehouse", "sql", "-", "--db", str(warehouse), "--config",
                           str(config)], input=_chained_ctes(23), env=env, capture_output=True, text=True, timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("error: the query ran past [warehouse] query_timeout_s = 1 s and was stopped; "
                                   "narrow it (a day, a host) or raise the setting")
    assert elapsed < 1.0 + HARD_STOP_GRACE_S + 8.0  # the process's start and imports: about 1 s here
    assert not list(tmp_path.glob("jh-sql-spill-*"))


def test_the_hard_deadline_ends_only_a_block_still_running(tmp_path):
    import subprocess
    import sys

    spill = tmp_path / "spill"
    spill.mkdir()
    script = ("import sys, time\nfrom joulehouse.cli.query_process import hard_deadline\n"
              "with hard_deadline(0.2, 'too long', sys.argv[1], grace_s=0.1):\n"
              "    time.sleep(float(sys.argv[2]))\nprint('finished')\n")
    quick = subprocess.run([sys.executable, "-c", script, str(spill), "0.01"], capture_output=True, text=True,
                           timeout=60)
    assert (quick.returncode, quick.stdout, quick.stderr) == (0, "finished\n", "")
    assert spill.exists()
    stuck = subprocess.run([sys.executable, "-c", script, str(spill), "60"], capture_output=True, text=True,
                           timeout=60)
    assert (stuck.returncode, stuck.stdout, stuck.stderr) == (2, "", "error: too long\n")
    assert not spill.exists()
