"""The Spark SQL is generated from the DuckDB files (warehouse/spark_dialect.py): every relation
the Spark engine runs (the warehouse's and the power fit's) renders, reads back as Spark SQL and
binds the same parameters, each of which the engine gives a value; each rewrite rule says what it
promises; a construct with no translation fails naming the file. No Spark here
(tests/warehouse/test_spark_engine.py runs both engines on one lake)."""

from __future__ import annotations

import datetime as dt
import re

import sqlglot
import pytest
from sqlglot import exp

from joulehouse.models.activity import ACTIVITY_MACROS
from joulehouse.models.settings import ModelSettings
from joulehouse.warehouse import spark_engine
from joulehouse.warehouse.spark_dialect import Macro, SparkDialectError, SparkStatements, parameters, spark_sql
from joulehouse.warehouse.sqlio import SqlFiles, used_parameters

WAREHOUSE_SQL = SqlFiles("joulehouse.warehouse", "sql")
MODELS_SQL = SqlFiles("joulehouse.models", "sql")
# the macro files production's renderer inlines: a test with a list of its own could pass while Spark fails
MODELS_MACROS = spark_engine.GENERATED_MODELS.macro_files
DUCKDB_ONLY = {"EPOCH", "EPOCH_US", "TO_SECONDS", "ISFINITE", "BITSTRING_AGG", "READ_CSV", "GETVARIABLE",
               "POWER_DYNAMIC_RATIO", "FIT_FEATURE_CHOICE", "ACTIVITY_OF_KIND", "FIT_ACTIVITY_KIND", "UNNEST", "RANGE",
               "LIST_CONTAINS"}


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
    assert not _functions(text) & DUCKDB_ONLY


def _variables(duckdb_text: str) -> set[str]:
    tree = sqlglot.parse_one(duckdb_text, read="duckdb")
    return {f.expressions[0].name for f in tree.find_all(exp.Anonymous) if f.name.upper() == "GETVARIABLE"}


@pytest.mark.parametrize("name", spark_engine.GENERATED_MODEL_RELATIONS)
def test_every_power_fit_relation_spark_runs_is_rendered_from_its_duckdb_file(name):
    text = spark_engine.load_spark_sql(name)
    assert sqlglot.parse_one(text, read="spark") is not None
    # bound parameters and a view's variables both become Spark's bound parameters, by name
    duck = MODELS_SQL.text(name)
    assert set(parameters(text)) == set(used_parameters(duck)) | _variables(duck)
    assert not _functions(text) & DUCKDB_ONLY
    # the engine binds a value to each (a missing one would fail only inside Spark)
    assert set(parameters(text)) <= set(spark_engine.power_parameters(dt.date(2026, 1, 2), ModelSettings()))


def test_the_dynamic_term_is_the_macros_expression_with_the_calls_arguments():
    text = spark_engine.load_spark_sql("power_suffstats").upper()
    assert "POWER_DYNAMIC_RATIO" not in text
    assert "POWER(T.PRIOR_BUSY_ACTIVITY_RATIO, G.ACTIVITY_EXPONENT) * EXP(-LEAST(T.SINCE_BUSY_S / G.ACTIVITY_HOLD_S, 700.0))" in text
    assert "END * POWER(T.CLOCK_RATIO, G.ALPHA)" in text


def test_the_reference_path_reads_the_window_spark_is_given():
    params = spark_engine.power_parameters(dt.date(2026, 1, 3), ModelSettings(history_days=3))
    assert params["first_day"] == params["power_features_rows_from_day"] == dt.date(2026, 1, 1)
    assert params["day"] == params["last_day"] == params["power_features_day"] == dt.date(2026, 1, 3)


def test_no_hand_kept_spark_copy_of_a_warehouse_or_power_fit_relation_is_left():
    copies = set(SqlFiles("joulehouse.warehouse", "spark_sql").names()) & (set(WAREHOUSE_SQL.names())
                                                                          | set(MODELS_SQL.names()))
    assert not copies, f"warehouse/spark_sql repeats {sorted(copies)}: render them from warehouse/sql or models/sql"


@pytest.mark.parametrize("folder, name", [("warehouse", n) for n in WAREHOUSE_SQL.names()]
                         + [("models", n) for n in MODELS_SQL.names()])
def test_any_warehouse_or_models_file_renders_or_names_what_has_no_translation(folder, name):
    # a new or rewritten DuckDB file flows to Spark once it renders; until then the error says why
    files = WAREHOUSE_SQL if folder == "warehouse" else MODELS_SQL
    statements = SparkStatements(files, views={"read_csv": "inventory_csv", "read_parquet": "lake_files"},
                                 macros=MODELS_MACROS if folder == "models" else ())
    try:
        text = statements.text(name)
    except SparkDialectError as exc:
        assert str(exc).startswith(f"sql/{name}.sql: ")
    else:
        assert sqlglot.parse_one(text, read="spark") is not None


def test_the_spark_engine_inlines_every_macro_file_of_models_sql():
    # a macro file left off production's list renders its calls as unknown functions: the Spark
    # engine fails on the first file that calls it, or a test with its own list passes regardless
    create_macro = re.compile(r"^\s*CREATE\s+(OR\s+REPLACE\s+)?(TEMP\s+|TEMPORARY\s+)?MACRO\b", re.I | re.M)
    macro_files = {n for n in MODELS_SQL.names() if create_macro.search(MODELS_SQL.text(n))}
    assert {"power_dynamic_ratio", *ACTIVITY_MACROS} <= macro_files
    assert set(MODELS_MACROS) == macro_files


@pytest.mark.parametrize("name", ["gpu_activity_samples", "power_interval_profiles", "recommend_gpu_profile",
                                  "power_feature_rows", "fct_power_fit_sums_hourly"])
def test_the_files_that_read_activity_in_a_fits_measure_render_with_the_rule_inlined(name):
    # the rule lives in two DuckDB macros (models/sql/activity_of_kind.sql, fit_activity_kind.sql);
    # Spark has none, so each call becomes the macro's expression and the files still render
    text = spark_engine.GENERATED_MODELS.text(name)
    assert not _functions(text) & DUCKDB_ONLY
    assert "'sm_active'" in text and "/ 100.0" in text
    duck = MODELS_SQL.text(name)
    assert set(parameters(text)) == set(used_parameters(duck)) | _variables(duck)


def test_epoch_keeps_the_fraction_of_a_second():
    text = spark_sql("SELECT epoch(t) AS a_s, epoch_us(t) AS b_us FROM x")
    assert "UNIX_TIMESTAMP" not in text.upper()
    assert text.upper().count("UNIX_MICROS(T)") == 2 and "/ 1E6" in text.upper()


def test_to_seconds_is_a_day_time_interval():
    assert "MAKE_DT_INTERVAL(0, 0, 0, :margin_s)" in spark_sql("SELECT t - to_seconds($margin_s) FROM x")


def test_duckdbs_cte_materialization_hint_is_dropped_for_spark():
    text = spark_sql("WITH a AS NOT MATERIALIZED (SELECT 1 AS x), b AS MATERIALIZED (SELECT 2 AS y) "
                     "SELECT * FROM a, b").upper()
    assert "MATERIALIZED" not in text and "WITH A AS (" in text.replace("\n", " ")


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


def test_a_views_variable_becomes_a_bound_parameter_and_must_be_named_by_a_literal():
    text = spark_sql("SELECT * FROM x WHERE day <= getvariable('fit_day') AND day > getvariable('fit_day') - 3")
    assert parameters(text) == ["fit_day"] and "GETVARIABLE" not in text.upper()
    with pytest.raises(SparkDialectError, match=r"^v\.sql: getvariable\(\) needs one variable name as a string literal"):
        spark_sql("SELECT getvariable(name) FROM x", where="v.sql")


def test_a_macro_call_is_its_expression_with_the_arguments_in_place_of_its_parameters():
    macro = Macro("CREATE OR REPLACE TEMP MACRO scaled(x, k) AS (x * k + t.k)", "m.sql")
    text = "".join(spark_sql("SELECT scaled(a + 1, 2) AS s FROM t", macros={"scaled": macro}).upper().split())
    # an argument that is an expression keeps its own precedence; a qualified t.k is no parameter
    assert "((A+1)*2+T.K)ASS" in text and "SCALED" not in text
    with pytest.raises(SparkDialectError, match=r"^q\.sql: scaled\(\) takes 2 arguments \(x, k; m\.sql\), given 1"):
        spark_sql("SELECT scaled(a) FROM t", where="q.sql", macros={"scaled": macro})
    with pytest.raises(SparkDialectError, match=r"^m\.sql: expected one CREATE MACRO"):
        Macro("SELECT 1", "m.sql")
