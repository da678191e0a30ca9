"""The DAG's build and fit tasks with `warehouse.engine = "spark"`: the hourly GPU energy computed
on Spark and loaded into the warehouse gives the same day as the DuckDB build, down to the
relations built on it, and the power models fitted on Spark's training sums are DuckDB's; a
missing pyspark or Java, or an unknown engine, stops the task with one line.

The Spark tests run PySpark local[2] (skipped where pyspark or Java is missing)."""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import time
from pathlib import Path

import duckdb
import pytest

from joulehouse.settings import LakeSettings, Settings, SettingsError, WarehouseSettings, settings_to_toml
from joulehouse.collectors.writer import write_dataset
from joulehouse import daily
from joulehouse.warehouse.spark_engine import SparkEngineError
from spark_day import simulated_day_without

DAY = dt.date(2026, 1, 2)


def spark_test(test):
    """Marks of a test that starts Spark (a JVM): slow, integration."""
    for mark in (pytest.mark.slow, pytest.mark.integration,
                 pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")):
        test = mark(test)
    return test


def _config(root: Path, name: str, lake: Path, inventory: str, **warehouse) -> Path:
    # Readings every 30 s: power gaps up to 60 s are bridged, so the power integral has work too.
    settings = Settings(lake=LakeSettings(path=str(lake)), warehouse=WarehouseSettings(
        db_path=str(root / f"{name}.duckdb"), inventory_path=inventory, max_gap_s=60.0, **warehouse))
    path = root / f"{name}.toml"
    path.write_text(settings_to_toml(settings))
    return path


def _rows(db: Path, sql: str) -> tuple[list[str], list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        cur = con.execute(sql, [DAY])
        return [d[0] for d in cur.description], cur.fetchall()
    finally:
        con.close()


def _types(db: Path, relation: str) -> list[tuple[str, str]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {relation}").fetchall()]
    finally:
        con.close()


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One simulated day built by the DAG's build and fit task functions, once per engine."""
    root = tmp_path_factory.mktemp("spark-dag")
    # The last host's GPUs lose their energy counters: its hours come from the power integral,
    # so both energy methods (and their coverage rules) run on both engines.
    summary, table = simulated_day_without(root / "lake", DAY, "energy_mj_total")
    shutil.rmtree(root / "lake" / "gpu_samples")
    write_dataset(root / "lake", "gpu_samples", table)
    configs = {
        "duckdb": _config(root, "duckdb", root / "lake", str(summary.inventory_path), engine="duckdb"),
        "spark": _config(root, "spark", root / "lake", str(summary.inventory_path),
                         engine="spark", spark_master="local[2]"),
    }
    results, seconds = {}, {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
        # The JVM's quick (C1) compiler only: a short local job spends its time compiling, not
        # running; the SQL Spark runs is unchanged. Saves about a third of the test's time here.
        patch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -XX:TieredStopAtLevel=1 pyspark-shell")
        for engine, config in configs.items():
            started = time.perf_counter()
            results[engine] = (daily.build_warehouse(DAY.isoformat(), str(config)),
                               daily.fit_power_models(DAY.isoformat(), str(config)))
            seconds[engine] = time.perf_counter() - started
    print(f"build + fit seconds: {seconds}")
    return {engine: root / f"{engine}.duckdb" for engine in configs}, results


@spark_test
@pytest.mark.parametrize("relation", ["fct_gpu_energy_hourly", "fct_node_reconciliation_hourly",
                                      "fct_gpu_coverage_daily"])
def test_spark_built_relations_have_the_duckdb_columns_and_types(built, relation):
    dbs, _ = built
    assert _types(dbs["spark"], relation) == _types(dbs["duckdb"], relation)


@spark_test
def test_hourly_gpu_energy_from_spark_equals_duckdb(built):
    dbs, results = built
    sql = ("SELECT gpu_uuid, hour_at, day, host, gpu_model, energy_source, source, n_samples, n_sources, "
           "energy_kwh, avg_power_w, coverage_ratio FROM fct_gpu_energy_hourly WHERE day = ? ORDER BY gpu_uuid, hour_at")
    columns, duck = _rows(dbs["duckdb"], sql)
    _, spark = _rows(dbs["spark"], sql)
    assert len(spark) == len(duck) == 16 * 24, "one row per GPU-hour on both engines"
    exact = columns.index("energy_kwh")
    for s, d in zip(spark, duck):
        assert s[:exact] == d[:exact], "same GPU-hour, energy source, stream and sample counts"
        for name, s_value, d_value in zip(columns[exact:], s[exact:], d[exact:]):
            assert (s_value is None) == (d_value is None), (name, s[:2])
            assert s_value == pytest.approx(d_value, rel=1e-9, abs=0.0), (name, s[:2])
    assert sum(r[exact] for r in spark) > 0
    methods = {r[columns.index("energy_source")] for r in spark}
    assert methods == {"counter", "power_integral"}, "both energy methods were compared"
    build, fit = results["spark"]
    assert build["engine"] == "spark" and build["spark_relations"] == ["fct_gpu_energy_hourly"]
    assert fit["fit_engine"] == "spark" and results["duckdb"][1]["fit_engine"] == "duckdb"
    assert results["duckdb"][0]["spark_relations"] == []


@spark_test
def test_relations_built_on_the_hourly_energy_are_the_same(built):
    dbs, results = built
    for relation, order in [("fct_node_reconciliation_hourly", "host, hour_at"),
                            ("fct_gpu_coverage_daily", "gpu_uuid")]:
        columns, duck = _rows(dbs["duckdb"], f"SELECT * FROM {relation} WHERE day = ? ORDER BY {order}")
        _, spark = _rows(dbs["spark"], f"SELECT * FROM {relation} WHERE day = ? ORDER BY {order}")
        assert duck and len(spark) == len(duck), relation
        for s, d in zip(spark, duck):
            for name, s_value, d_value in zip(columns, s, d):
                if isinstance(d_value, float) and s_value is not None:
                    assert s_value == pytest.approx(d_value, rel=1e-9, abs=1e-12), (relation, name)
                else:
                    assert s_value == d_value, (relation, name)
    spark_rows, duck_rows = results["spark"][0]["clean_gpu_rows"], results["duckdb"][0]["clean_gpu_rows"]
    assert spark_rows == duck_rows > 0


@spark_test
def test_power_models_fitted_on_spark_sums_are_the_duckdb_ones(built):
    # The Spark run's training sums come from Spark (the lake), the DuckDB run's from the
    # warehouse's stored hourly sums: the same models, shapes and gate; coefficients and held-out
    # errors equal to rounding.
    dbs, _ = built
    exact = ["gpu_model", "feature_set", "n_samples", "n_holdout", "dyn_freq_exponent", "activity_exponent",
             "activity_hold_s", "passed_gate"]
    close = ["static_w", "temp_w_per_c", "dyn_w", "mem_w", "pcie_w_per_gbps", "mape_pct", "r2", "rmse_w"]
    sql = f"SELECT {', '.join(exact + close)} FROM fct_power_model WHERE day = ? ORDER BY gpu_model"
    _, duck = _rows(dbs["duckdb"], sql)
    _, spark = _rows(dbs["spark"], sql)
    assert len(duck) >= 2 and len(spark) == len(duck)
    for s, d in zip(spark, duck):
        assert s[:len(exact)] == d[:len(exact)], d[0]
        for name, s_value, d_value in zip(close, s[len(exact):], d[len(exact):]):
            assert s_value == pytest.approx(d_value, rel=1e-6, abs=1e-9), (d[0], name)


@pytest.fixture()
def spark_config(tmp_path) -> Path:
    return _config(tmp_path, "spark", tmp_path / "lake", "", engine="spark")


def test_missing_pyspark_stops_the_build_with_one_line_before_touching_the_warehouse(spark_config, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    java = spark_config.parent / "jdk" / "bin" / "java"  # Java "present", so pyspark is what is missing
    java.parent.mkdir(parents=True)
    java.write_text("")
    monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
    with pytest.raises(SparkEngineError, match="needs pyspark") as caught:
        daily.build_warehouse(DAY.isoformat(), str(spark_config))
    assert "\n" not in str(caught.value)
    assert not (spark_config.parent / "spark.duckdb").exists()


def test_missing_java_stops_the_build_with_one_line(spark_config, monkeypatch):
    monkeypatch.setenv("PATH", str(spark_config.parent / "no-bin"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkEngineError, match="needs Java 17") as caught:
        daily.build_warehouse(DAY.isoformat(), str(spark_config))
    assert "\n" not in str(caught.value)
    assert not (spark_config.parent / "spark.duckdb").exists()


def test_an_unknown_engine_is_named_in_the_error(tmp_path):
    config = _config(tmp_path, "w", tmp_path / "lake", "")
    config.write_text(config.read_text().replace('engine = "duckdb"', 'engine = "polars"'))
    with pytest.raises(SettingsError, match=r"\[warehouse\].engine = 'polars' \(in .*\): input should be 'duckdb' or 'spark'"):
        daily.build_warehouse(DAY.isoformat(), str(config))
    assert not (tmp_path / "w.duckdb").exists()  # refused when read, before the warehouse is opened
