"""`joulehouse sql`: read-only queries, bound parameters, saved queries, descriptions."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
import typer
from typer.testing import CliRunner

from joulehouse.settings import WarehouseSettings
from joulehouse.collectors.writer import write_dataset
from joulehouse.cli.sql import register
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.catalog import saved_queries
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 1, 2)


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    root = tmp_path_factory.mktemp("sqlcli")
    t0 = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    rows = [
        dict(sampled_at=t0 + dt.timedelta(seconds=s), host="node-01", gpu_index=i, gpu_uuid=f"GPU-{i}",
             gpu_model="NVIDIA H200", power_w=75.0 + 100 * i, util_gpu_pct=0.0 if i == 0 else 90.0,
             power_limit_w=700.0, clock_event_reasons=1 if i == 0 else 4, source="nvml")
        for i in range(3) for s in range(0, 7201, 2)
    ]
    write_dataset(root / "lake", "gpu_samples", pa.Table.from_pylist(rows))
    con = connect(root / "w.duckdb", root / "lake")
    build_day(con, DAY, WarehouseSettings(), now=dt.datetime(2026, 2, 1, tzinfo=dt.timezone.utc))
    con.close()
    return str(root / "w.duckdb")


def _app():
    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:
        """joulehouse"""

    return app


def run(*args):
    return CliRunner().invoke(_app(), ["sql", *args])


def test_query_with_bound_parameter_as_json(db):
    res = run("SELECT gpu_uuid, sum(energy_kwh) AS kwh FROM fct_gpu_energy_hourly WHERE day = $day::DATE GROUP BY 1 ORDER BY 1",
              "--db", db, "--format", "json", "--param", "day=2026-01-02")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["gpu_uuid"] for r in rows] == ["GPU-0", "GPU-1", "GPU-2"]
    assert rows[2]["kwh"] == pytest.approx(275.0 * 7200 / 3.6e6)


@pytest.mark.parametrize("statement", ["DELETE FROM stg_gpu_samples", "CREATE TABLE x AS SELECT 1", "DROP VIEW raw_gpu_samples"])
def test_statements_that_write_are_refused(db, statement):
    res = run(statement, "--db", db)
    assert res.exit_code != 0
    assert "read-only" in res.output
    assert run("SELECT count(*) FROM stg_gpu_samples", "--db", db, "--format", "csv").output.splitlines()[1] == str(3 * 3601)


def test_missing_parameter_is_named(db):
    res = run("SELECT * FROM fct_gpu_energy_hourly WHERE day = $day", "--db", db)
    assert res.exit_code != 0 and "--param day=" in res.output


def test_every_saved_query_runs(db):
    for name in saved_queries():
        res = run("--saved", name, "--param", "day=2026-01-02", "--db", db, "--format", "csv")
        assert res.exit_code == 0, (name, res.output)
        assert len(res.output.splitlines()) >= 2, name


def test_saved_queries_answer_what_operators_ask(db):
    idle = run("--saved", "idle-gpus", "--param", "day=2026-01-02", "--db", db, "--format", "json")
    assert [r["gpu_uuid"] for r in json.loads(idle.output)] == ["GPU-0"]
    throttle = json.loads(run("--saved", "throttle-time-by-reason", "--param", "day=2026-01-02", "--db", db, "--format", "json").output)
    hours = {r["reason"]: r["throttled_hours"] for r in throttle}
    assert hours["sw_power_cap"] == pytest.approx(2 * 2.0, rel=1e-3)  # two GPUs, 2 h each
    assert hours["gpu_idle"] == pytest.approx(2.0, rel=1e-3)


@pytest.mark.slow
def test_large_results_stream_in_batches(db):
    res = run("SELECT * FROM range(10000)", "--db", db, "--format", "csv")
    assert res.exit_code == 0 and len(res.output.splitlines()) == 10001
    table = run("SELECT * FROM range(5000)", "--db", db)
    assert "5000 row(s)" in table.output


def test_a_table_stops_at_its_row_cap_and_says_how_to_get_every_row(db):
    """5 M rows drew as a table for five minutes until the query's time limit ended it."""
    from joulehouse.cli.sql import TABLE_MAX_ROWS

    exact = run(f"SELECT * FROM range({TABLE_MAX_ROWS})", "--db", db)
    assert f"{TABLE_MAX_ROWS} row(s)" in exact.output
    big = run("SELECT range AS i FROM range(5000000)", "--db", db)
    assert big.exit_code == 0
    assert f"the first {TABLE_MAX_ROWS:,} rows; the result has more: --format csv or json" in big.output
    assert f"│ {TABLE_MAX_ROWS - 1} " in big.output and f"│ {TABLE_MAX_ROWS} " not in big.output


def test_describe_lists_relations_and_columns_with_units(db):
    listing = run("--describe")
    assert "fct_gpu_energy_hourly" in listing.output and "top-energy-gpus" in listing.output
    one = run("--describe", "fct_gpu_energy_hourly")
    assert "energy_kwh" in one.output and "[kWh]" in one.output
    assert run("--describe", "no_such_view").exit_code != 0


def test_a_table_shows_every_value_whole_and_as_written(db):
    """Before: piped, the table was squeezed to 80 columns and cut values short
    ('0.572912131666…'), and a value holding rich markup lost it ('[bold]x[/bold] [recommend]'
    printed as 'x ')."""
    res = run("SELECT '[bold]x[/bold] [recommend]' AS \"[label]\", 0.57291213166612345 AS long_value_w, "
              "repeat('w', 120) AS wide_text, NULL AS nothing", "--db", db, "--format", "table")
    assert res.exit_code == 0, res.output
    assert "[bold]x[/bold] [recommend]" in res.output and "[label]" in res.output
    assert "0.5729121316661" in res.output and "…" not in res.output
    assert "w" * 120 in res.output  # one line: not folded to fit 80 columns in a pipe
    assert "NULL" in res.output and "1 row(s)" in res.output


def test_a_value_can_never_drive_the_terminal_it_is_printed_on(db, monkeypatch):
    """An escape sequence in a GPU name from an imported log retitled and cleared the analyst's
    terminal through the table and the CSV; it is shown as \\x1b instead. Piped, the CSV is data."""
    query = "SELECT 'NVIDIA' || chr(27) || '[2J' || chr(27) || ']0;PWNED' || chr(7) || ' H100' AS gpu_model"
    table = run(query, "--db", db, "--format", "table")
    assert table.exit_code == 0 and "\x1b" not in table.output and "\x07" not in table.output
    assert "NVIDIA\\x1b[2J\\x1b]0;PWNED\\x07 H100" in table.output
    piped = run(query, "--db", db, "--format", "csv")
    assert piped.output.splitlines()[1] == "NVIDIA\x1b[2J\x1b]0;PWNED\x07 H100"
    import io

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    screen = Terminal()
    monkeypatch.setattr("sys.stdout", screen)
    from joulehouse.cli import sql as sql_cli

    sql_cli._print(type("R", (), {"columns": ["gpu_model"], "batches": [[("A" + chr(27) + "[2J",)]]})(),
                   sql_cli.OutputFormat.csv)
    assert screen.getvalue().splitlines() == ["gpu_model", "A\\x1b[2J"]


def test_a_query_longer_than_a_command_line_comes_on_standard_input(db):
    """A generated query passes the ~128 KiB an argument may hold: '-' reads it from stdin, with a cap."""
    padding = "\n".join(f"-- {i:06d} " + "x" * 90 for i in range(2000))  # about 200 KB of comments
    query = f"{padding}\nSELECT count(DISTINCT gpu_uuid) AS gpus FROM fct_gpu_energy_hourly WHERE day = $day::DATE"
    res = CliRunner().invoke(_app(), ["sql", "-", "--db", db, "--format", "json", "--param", "day=2026-01-02"],
                             input=query)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output) == [{"gpus": 3}]
    from joulehouse.cli.sql import MAX_STDIN_QUERY_BYTES

    res = CliRunner().invoke(_app(), ["sql", "-", "--db", db], input="SELECT 1 " + " " * MAX_STDIN_QUERY_BYTES)
    assert res.exit_code == 2 and "longer than 1,048,576 bytes" in res.output


def test_a_wrong_name_is_refused_in_one_line_with_duckdbs_hint_and_the_line(db):
    res = run("SELECT gpu_uuid\nFROM fct_gpu_energy_hourli", "--db", db)
    assert res.exit_code == 2
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: query failed: Catalog Error: Table with name fct_gpu_energy_hourli does not exist!")
    assert 'Did you mean "fct_gpu_energy_hourly"?' in line and line.endswith("(line 2)")
