"""The Spark SQL is generated from the DuckDB files (warehouse/spark_dialect.py): every relation
the Spark engine runs renders, reads back as Spark SQL and binds the same parameters; each rewrite
rule says what it promises; a construct with no translation fails naming the file. No Spark here
(tests/warehouse/test_spark_engine.py runs both engines on one lake)."""

from __future__ import annotations

import sqlglot
import pytest
from sqlglot import exp

from joulehouse.warehouse import spark_engine
from joulehouse.warehouse.spark_dialect import SparkDialectError, SparkStatements, parameters, spark_sql
from joulehouse.warehouse.sqlio import SqlFiles, used_parameters

WAREHOUSE_SQL = SqlFiles("joulehouse.warehouse", "sql")


def _functions(spark_text: str) -> set[str]:
    tree = sqlglot.parse_one(spark_text, read="spark")
    return {(f.name if isinstance(f, exp.Anonymous) else f.sql_name()).upper() for f in tree.find_all(exp.Func)}


@pytest.mark.parametrize("name", spark_engine.GENERATED_RELATIONS)
def test_every_relation_spark_runs_is_rendered_from_its_duckdb_file(name):
    text = spark_engine.load_spark_sql(name)
    assert sqlglot.parse_one(text, read="spark") is not None
    # the same values bound, less the file a reader view stands for
    duck = set(used_parameters(WAREHOUSE_SQL.text(name))) - {"inventory_path"}
    assert set(parameters(text)) == duck
    # no DuckDB-only function survives the rules
    assert not _functions(text) & {"EPOCH_US", "TO_SECONDS", "ISFINITE", "BITSTRING_AGG", "READ_CSV", "GETVARIABLE"}


def test_no_hand_kept_spark_copy_of_a_warehouse_relation_is_left():
    copies = set(SqlFiles("joulehouse.warehouse", "spark_sql").names()) & set(WAREHOUSE_SQL.names())
    assert not copies, f"warehouse/spark_sql repeats {sorted(copies)}: render them from warehouse/sql instead"


@pytest.mark.parametrize("name", WAREHOUSE_SQL.names())
def test_any_warehouse_file_renders_or_names_what_has_no_translation(name):
    # a new or rewritten DuckDB file flows to Spark once it renders; until then the error says why
    statements = SparkStatements(WAREHOUSE_SQL, views={"read_csv": "inventory_csv", "read_parquet": "lake_files"})
    try:
        text = statements.text(name)
    except SparkDialectError as exc:
        assert str(exc).startswith(f"sql/{name}.sql: ")
    else:
        assert sqlglot.parse_one(text, read="spark") is not None


def test_epoch_keeps_the_fraction_of_a_second():
    text = spark_sql("SELECT epoch(t) AS a_s, epoch_us(t) AS b_us FROM x")
    assert "UNIX_TIMESTAMP" not in text.upper()
    assert text.upper().count("UNIX_MICROS(T)") == 2 and "/ 1E6" in text.upper()


def test_to_seconds_is_a_day_time_interval():
    assert "MAKE_DT_INTERVAL(0, 0, 0, :margin_s)" in spark_sql("SELECT t - to_seconds($margin_s) FROM x")


def test_isfinite_is_spelled_out():
    text = spark_sql("SELECT coalesce(isfinite(power_w), true) FROM x").upper()
    assert "ISNAN(POWER_W)" in text and "ABS(POWER_W) = CAST('INFINITY' AS DOUBLE)" in text


def test_bitstring_agg_counts_distinct_values_and_bit_count_of_an_integer_stays():
    text = spark_sql("WITH s AS (SELECT g, bitstring_agg(v, 0, 10) AS seen, bit_count(flags) AS n FROM x GROUP BY g) "
                     "SELECT g, bit_count(seen) AS distinct_v, n FROM s").upper()
    assert "COLLECT_SET(V)" in text and "SIZE(SEEN)" in text
    assert "BIT_COUNT(FLAGS)" in text and "BIT_COUNT(SEEN)" not in text


def test_a_file_reader_becomes_the_registered_view():
    text = spark_sql("SELECT * FROM read_csv($p, header = true) AS c", views={"read_csv": "inventory_csv"})
    assert "FROM inventory_csv AS c" in text and ":p" not in text
    with pytest.raises(SparkDialectError, match=r"^inv\.sql: reads a file with read_csv\(\)"):
        spark_sql("SELECT * FROM read_csv($p)", where="inv.sql")


def test_a_duckdb_function_without_translation_names_the_file_and_function():
    with pytest.raises(SparkDialectError, match=r"^f\.sql: no Spark translation for DuckDB function\(s\) list_frobnicate"):
        spark_sql("SELECT list_frobnicate(a) FROM x", where="f.sql")


def test_parameters_stay_bound_and_text_that_is_not_sql_is_one_line():
    assert parameters(spark_sql("SELECT * FROM x WHERE day = $day::DATE AND h = ANY($hosts)")) == ["day", "hosts"]
    with pytest.raises(SparkDialectError, match=r"^bad\.sql: ") as info:
        spark_sql("SELECT FROM WHERE ((", where="bad.sql")
    assert "\n" not in str(info.value)
    with pytest.raises(SparkDialectError, match="expected one statement, found 2"):
        spark_sql("SELECT 1; SELECT 2")


def test_timestamps_from_seconds_and_now_keep_their_meaning():
    text = spark_sql("SELECT to_timestamp(h * 3600) AS hour_at, now() AS built_at FROM x").upper()
    assert "TIMESTAMP_SECONDS(H * 3600)" in text and "CURRENT_TIMESTAMP()" in text and "FROM_UNIXTIME" not in text
