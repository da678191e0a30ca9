"""`joulehouse sql` as a hostile user meets it: one read statement, files of the lake and of the
warehouse only, no setting that can be changed back.

The deployment this guards (the demo's layout): the signing key in DIR/keys beside the warehouse
file DIR/warehouse.duckdb. Whoever reads that key can sign configs that every node agent applies
as root; whoever writes into the lake fakes the readings the next build takes in.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.config_contract import generate_keypair
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.collectors.writer import write_dataset
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect
from joulehouse.warehouse.sqlrun import QueryError, open_read_only, run_query, sandbox_paths

DAY = dt.date(2026, 1, 2)
NOW = dt.datetime(2026, 2, 1, tzinfo=dt.timezone.utc)


def _rows(host: str = "node-01", seconds: int = 3600) -> pa.Table:
    t0 = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    return pa.Table.from_pylist([
        dict(sampled_at=t0 + dt.timedelta(seconds=s), host=host, gpu_index=i, gpu_uuid=f"GPU-{i}",
             gpu_model="NVIDIA H200", power_w=100.0 + 100 * i, source="nvml")
        for i in range(2) for s in range(0, seconds + 1, 10)
    ])


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """DIR/lake, DIR/warehouse.duckdb, DIR/warehouse/ (the warehouse's own Parquet), DIR/keys."""
    root = tmp_path_factory.mktemp("site")
    write_dataset(root / "lake", "gpu_samples", _rows())
    con = connect(root / "warehouse.duckdb", root / "lake")
    build_day(con, DAY, WarehouseSettings(), now=NOW)
    con.close()
    generate_keypair(root / "keys")
    (root / "warehouse").mkdir(exist_ok=True)  # the build keeps its readings files there too
    pq.write_table(pa.table({"facts_kept": [7]}), root / "warehouse" / "facts.parquet")
    (root / "notes.csv").write_text("secret\n42\n")  # beside the warehouse file, not its own
    (root / "lake" / "keys_link").symlink_to(root / "keys")
    return root


def sql(site: Path, *args: str):
    return CliRunner().invoke(app, ["sql", *args, "--db", str(site / "warehouse.duckdb"), "--format", "csv"])


def _key_text(site: Path) -> str:
    return (site / "keys" / "joulehouse-ed25519.pem").read_text().splitlines()[1]


def _refused(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    for needle in needles:
        assert needle in lines[0], result.output


READS_OUTSIDE = {
    "read_text of the private key": "SELECT content FROM read_text('{site}/keys/joulehouse-ed25519.pem')",
    "read_blob of the private key": "SELECT content FROM read_blob('{site}/keys/joulehouse-ed25519.pem')",
    "read_csv of /etc/passwd": "SELECT * FROM read_csv('/etc/passwd')",
    "read_json of a system file": "SELECT * FROM read_json('/etc/os-release')",
    "glob of /etc": "SELECT * FROM glob('/etc/*')",
    "glob of the folder holding the warehouse": "SELECT * FROM glob('{site}/*')",
    "a file beside the warehouse": "SELECT * FROM read_csv('{site}/notes.csv')",
    "the lake's parent through ..": "SELECT content FROM read_text('{site}/lake/../keys/joulehouse-ed25519.pem')",
    "a symlink in the lake to the keys": "SELECT content FROM read_text('{site}/lake/keys_link/joulehouse-ed25519.pem')",
    "a file URL": "SELECT content FROM read_text('file:///etc/passwd')",
    "the key as the second statement": "SELECT 1; SELECT content FROM read_text('{site}/keys/joulehouse-ed25519.pem')",
}


@pytest.mark.parametrize("query", READS_OUTSIDE.values(), ids=READS_OUTSIDE.keys())
def test_no_file_outside_the_lake_and_the_warehouse_can_be_read(site, query):
    result = sql(site, query.format(site=site))
    _refused(result)
    assert _key_text(site) not in result.output and "root:" not in result.output and "secret" not in result.output


def test_a_refused_read_names_the_file_and_what_may_be_read(site):
    result = sql(site, f"SELECT content FROM read_text('{site}/keys/joulehouse-ed25519.pem')")
    _refused(result, f"{site}/keys/joulehouse-ed25519.pem", f"{site}/lake/", f"{site}/warehouse/")


WRITES_AND_SETTINGS = {
    "COPY to any path": ("COPY (SELECT 42 AS x) TO '{site}/pwned.csv'", "COPY", "pwned.csv"),
    "COPY fake readings into the lake": (
        "COPY (SELECT * EXCLUDE (date) FROM raw_gpu_samples) "
        "TO '{site}/lake/gpu_samples/date=2026-01-02/host=node-01/part-fake.parquet' (FORMAT parquet)",
        "COPY", "lake/gpu_samples/date=2026-01-02/host=node-01/part-fake.parquet"),
    "EXPLAIN ANALYZE runs its COPY": ("EXPLAIN ANALYZE COPY (SELECT 1) TO '{site}/lake/explained.csv'", "COPY",
                                      "lake/explained.csv"),
    "EXPLAIN (ANALYZE) runs its COPY": ("EXPLAIN (ANALYZE, FORMAT json) /* x */ COPY (SELECT 1) TO '{site}/lake/e.csv'",
                                        "COPY", "lake/e.csv"),
    # DuckDB's tokenizer counts bytes: read as characters, these accented letters made the check see
    # the string ' SELECT 1 --' as the statement, and the COPY ran
    "EXPLAIN ANALYZE COPY behind accented letters": (
        "EXPLAIN /*" + "é" * 33 + "*/ ANALYZE COPY (SELECT 'x' AS a, ' SELECT 1 --' AS pad) TO '{site}/lake/accents.csv'",
        "COPY", "lake/accents.csv"),
    "SET the sandbox off": ("SET enable_external_access = true", "SET", None),
    "SET a session setting": ("SET threads = 1", "SET", None),
    "RESET the allowed folders": ("RESET allowed_directories", "RESET", None),
    "SET VARIABLE the lake elsewhere": ("SET VARIABLE jh_lake = '/etc'", "SET", None),
    "ATTACH another database": ("ATTACH '{site}/other.duckdb' AS other", "ATTACH", "other.duckdb"),
    "INSTALL an extension": ("INSTALL httpfs", "INSTALL", None),
    "LOAD an extension": ("LOAD json", "LOAD", None),
    "PRAGMA": ("PRAGMA database_list", "PRAGMA", None),
    "CALL": ("CALL pragma_version()", "CALL", None),
    "CREATE a temporary table": ("CREATE TEMP TABLE t AS SELECT 1", "CREATE", None),
    "EXPORT DATABASE": ("EXPORT DATABASE '{site}/exported'", "EXPORT", "exported"),
}


def test_a_write_after_with_is_refused_by_what_it_does(site):
    """It read "WITH statements are refused ... runs SELECT, WITH", which contradicts itself."""
    result = sql(site, "WITH g AS (SELECT 1) DELETE FROM fct_gpu_energy_hourly")
    _refused(result, "DELETE (after WITH) statements are refused", "is read-only")


def test_a_query_nested_too_deep_is_told_what_to_do_not_to_set_a_limit(site):
    """DuckDB's hint reads 'Use "SET max_expression_depth TO x"', which the sandbox refuses."""
    result = sql(site, "SELECT " + "(" * 2000 + "1" + ")" * 2000)
    assert result.exit_code == 2
    assert "Max expression depth limit of 1000 exceeded" in result.output and "SET" not in result.output
    assert "Nest less" in result.output


@pytest.mark.parametrize("query, verb, created", WRITES_AND_SETTINGS.values(), ids=WRITES_AND_SETTINGS.keys())
def test_only_read_statements_run(site, query, verb, created):
    result = sql(site, query.format(site=site))
    _refused(result, f"{verb} statements are refused" if verb != "EXPORT" else "refused", "is read-only")
    if created:
        assert not (site / created).exists()
    assert not list(site.glob("lake/**/*.csv"))


def test_a_multi_statement_string_is_refused_whole(site):
    _refused(sql(site, "SELECT 1; SELECT 2"), "2 statements")


@pytest.mark.parametrize("query, expected_first_row", [
    # The README's queries, as printed there.
    ("SELECT gpu_model, sum(energy_kwh) AS energy_kwh FROM fct_gpu_energy_hourly GROUP BY ALL",
     "NVIDIA H200,0.3"),  # 100 W + 200 W for one hour
    ("SELECT count(*) AS n FROM raw_gpu_samples", "722"),
    ("WITH g AS (SELECT DISTINCT gpu_uuid FROM stg_gpu_samples) SELECT count(*) FROM g", "2"),
    ("FROM stg_gpu_samples SELECT max(power_w)", "200.0"),
    ("PIVOT stg_gpu_samples ON gpu_uuid IN ('GPU-0') USING count(*) GROUP BY host", "node-01,361"),
])
def test_reads_still_work(site, query, expected_first_row):
    result = sql(site, query)
    assert result.exit_code == 0, result.output
    got, expected = result.output.splitlines()[1].split(","), expected_first_row.split(",")
    assert got[:-1] == expected[:-1] and (got[-1] == expected[-1] or float(got[-1]) == pytest.approx(float(expected[-1])))


@pytest.mark.parametrize("query", ["DESCRIBE fct_gpu_energy_hourly", "SHOW TABLES", "SUMMARIZE stg_gpu_samples",
                                   "EXPLAIN SELECT * FROM fct_gpu_energy_hourly",
                                   "EXPLAIN ANALYZE SELECT count(*) FROM raw_gpu_samples",
                                   "EXPLAIN /* énergie, données */ SELECT count(*) FROM fct_gpu_energy_hourly",
                                   "/* a comment first */ SELECT 1"])
def test_describe_show_summarize_explain_run(site, query):
    result = sql(site, query)
    assert result.exit_code == 0, result.output


def test_the_warehouses_own_folder_is_readable_and_its_parent_is_not(site):
    from joulehouse.collectors.schema import DATASETS

    assert sandbox_paths(site / "warehouse.duckdb", str(site / "lake")) == (
        [*(f"{site}/lake/{dataset}/" for dataset in DATASETS), f"{site}/warehouse/"], [f"{site}/warehouse.duckdb"])
    ok = sql(site, f"SELECT facts_kept FROM read_parquet('{site}/warehouse/facts.parquet')")
    assert ok.exit_code == 0 and ok.output.splitlines()[1] == "7", ok.output
    _refused(sql(site, f"SELECT * FROM glob('{site}/warehouse/../keys/*')"))


def test_the_readme_parameter_query_and_saved_queries_run(site):
    result = sql(site, "SELECT hour_at, host, gpu_model, energy_kwh, coverage_ratio FROM fct_gpu_energy_hourly "
                 "WHERE day = $day ORDER BY energy_kwh DESC LIMIT 5", "--param", "day=2026-01-02")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].endswith(",node-01,NVIDIA H200,0.2,1.0")  # GPU-1, 200 W for the first hour
    saved = sql(site, "--saved", "top-energy-gpus", "--param", "day=2026-01-02")
    assert saved.exit_code == 0 and "GPU-1" in saved.output.splitlines()[1], saved.output


@pytest.mark.parametrize("query, params", [
    ("SELECT $Day::DATE AS d", ["day=2026-01-02"]),
    ("SELECT $day::DATE AS d", ["Day=2026-01-02"]),
    ("SELECT least($Day::DATE, $day::DATE) AS d", ["DAY=2026-01-02"]),
])
def test_parameter_names_match_whatever_their_case(site, query, params):
    result = sql(site, query, *[a for p in params for a in ("--param", p)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["d", "2026-01-02"]


def test_a_parameter_given_twice_in_two_cases_is_refused(site):
    _refused(sql(site, "SELECT $day AS d", "--param", "day=2026-01-02", "--param", "Day=2026-01-03"),
             "--param day given twice")


def test_two_dashes_inside_a_string_are_not_a_comment(site):
    result = sql(site, "SELECT '--' AS dashes, $day AS d -- $ignored", "--param", "day=x")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["dashes,d", "--,x"]


def test_run_query_refuses_a_connection_outside_the_sandbox(site):
    con = duckdb.connect(str(site / "warehouse.duckdb"), read_only=True)
    try:
        with pytest.raises(QueryError, match="open_read_only"):
            run_query(con, f"SELECT content FROM read_text('{site}/keys/joulehouse-ed25519.pem')")
    finally:
        con.close()


def test_the_sandbox_cannot_be_widened_from_the_connection(site):
    con = open_read_only(site / "warehouse.duckdb")
    try:
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.Error, match="locked"):
            con.execute("SET allowed_directories = ['/']")
    finally:
        con.close()


@pytest.mark.integration
def test_an_object_store_lake_is_read_and_nothing_else_in_the_store(tmp_path):
    from s3_server import local_s3

    with local_s3("sandbox-lake"):
        import s3fs

        store = s3fs.S3FileSystem()
        store.mkdir("sandbox-secrets")
        store.pipe_file("sandbox-secrets/joulehouse-ed25519.pem", b"PRIVATE KEY")
        store.pipe_file("sandbox-lake/keys/joulehouse-ed25519.pem", b"PRIVATE KEY")
        write_dataset("s3://sandbox-lake/lake", "gpu_samples", _rows(seconds=600))
        con = connect(tmp_path / "warehouse.duckdb", "s3://sandbox-lake/lake")
        build_day(con, DAY, WarehouseSettings(), now=NOW)
        con.close()
        ok = sql(tmp_path, "SELECT count(*) AS n FROM raw_gpu_samples")
        assert ok.exit_code == 0 and ok.output.splitlines()[1] == "122", ok.output
        globbed = sql(tmp_path, "SELECT count(*) AS n FROM glob('s3://sandbox-lake/lake/gpu_samples/**/*.parquet')")
        assert globbed.exit_code == 0 and globbed.output.splitlines()[1] == "1", globbed.output
        for query in ("SELECT content FROM read_text('s3://sandbox-secrets/joulehouse-ed25519.pem')",
                      "SELECT content FROM read_text('s3://sandbox-lake/keys/joulehouse-ed25519.pem')",
                      "SELECT content FROM read_text('s3://sandbox-lake/lake/../keys/joulehouse-ed25519.pem')",
                      "SELECT * FROM glob('s3://sandbox-lake/*')"):
            result = sql(tmp_path, query)
            _refused(result, "s3://sandbox-lake/lake/")
            assert "PRIVATE KEY" not in result.output
        _refused(sql(tmp_path, "COPY (SELECT 1) TO 's3://sandbox-lake/lake/x.csv'"), "COPY statements are refused")
        assert not store.exists("sandbox-lake/lake/x.csv")


def test_a_warehouse_file_naming_the_root_as_its_lake_opens_no_other_file(site, tmp_path):
    """The sandbox took the lake from the file's jh_meta: a crafted file naming '/' read the site's
    private key. Only the lake's dataset folders are open now, wherever the lake is said to be."""
    import duckdb

    evil = tmp_path / "evil.duckdb"
    con = duckdb.connect(str(evil))
    con.execute("CREATE TABLE jh_meta (lake_path VARCHAR, updated_at TIMESTAMPTZ)")
    con.execute("INSERT INTO jh_meta VALUES ('/', now())")
    con.close()
    result = CliRunner().invoke(app, ["sql", f"SELECT content FROM read_text('{site}/keys/joulehouse-ed25519.pem')",
                                      "--db", str(evil), "--format", "csv"])
    _refused(result, "reads outside the warehouse")
    assert _key_text(site) not in result.output
    _refused(sql(site, f"SELECT * FROM glob('{site}/lake/*')"), "reads outside the warehouse")  # the lake's root too


def test_a_value_python_cannot_hold_is_an_error_line_not_a_traceback(site):
    """fetchmany raised OverflowError (an INTERVAL of 2**31 days), outside duckdb.Error."""
    result = sql(site, "SELECT to_days(2147483647) AS i")  # csv streams: its header came out first
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "error: a value of the result cannot be shown" in result.output


@pytest.mark.parametrize("query, said", [
    ("UPDATE EXTENSIONS", "UPDATE statements are refused"),  # ValueError: 29 is not a valid StatementType
    ("EXPLAIN UPDATE EXTENSIONS", "EXPLAIN UPDATE statements are refused"),
    ("WITH " + ",".join(f"a{i} AS (SELECT 1)" for i in range(10_000)) + " SELECT 1",
     "tokens; joulehouse sql parses at most 50,000"),  # 53,000 CTEs parsed 86 s, past every limit
])
def test_what_python_or_the_parser_cannot_take_is_one_line(site, query, said):
    _refused(sql(site, query), said)


def test_a_result_that_cannot_be_written_is_one_line(site, tmp_path):
    full = subprocess.run([sys.executable, "-m", "joulehouse", "sql", "SELECT * FROM range(200000)", "--format", "json",
                           "--db", str(site / "warehouse.duckdb")], stdout=open("/dev/full", "w"),
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert full.returncode == 2 and full.stderr.strip() == "error: cannot write the result: No space left on device"


def test_a_wide_table_stops_at_the_query_time(site, tmp_path):
    """The timer interrupts DuckDB, and a batch of 2,048 rows x 500 columns was drawn for 277 s
    past a 5 s limit. The table is drawn a few thousand cells at a time, the time checked between."""
    config = tmp_path / "short.toml"
    config.write_text("[warehouse]\nquery_timeout_s = 1.0\n")
    wide = "SELECT " + ", ".join(f"range AS c{i}" for i in range(500)) + " FROM range(2048)"
    started = time.monotonic()
    result = CliRunner().invoke(app, ["sql", wide, "--db", str(site / "warehouse.duckdb"), "--config", str(config)])
    assert result.exit_code == 2 and "query_timeout_s = 1 s" in result.output
    assert time.monotonic() - started < 30
