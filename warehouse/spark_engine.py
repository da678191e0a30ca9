"""The heavy daily SQL on Apache Spark, over the same Hive-partitioned lake as DuckDB.

Spark runs the DuckDB files as sqlglot renders them (warehouse/spark_dialect.py, no Spark copy to
keep in step): from warehouse/sql the inventory, the quarantine rules, the clean readings and the
hourly GPU energy (kWh per GPU-hour); from models/sql the power fit's reference path (the stream of
each GPU and day, the feature choice, the features and the sufficient statistics per GPU model and
shape: models.power_features.build_power_features and suffstats_rows, each DuckDB temp table or
view a Spark temp view of the same file). warehouse/spark_sql holds only what has no DuckDB file:
the lake's hosts of a day and the day's GPU energy per host and model. Results come back as polars frames with
the same columns and units as the DuckDB relations, so the rest of the pipeline (fitting,
accounting, reports) does not know which engine ran.

Spark is an optional extra (`pip install joulehouse[spark]`, Java 17): pyspark is imported only
inside these functions. The lake is read with partition discovery (`basePath`), so the typed
`date` column prunes files exactly as DuckDB's `hive_partitioning` does. The session runs in UTC
and timestamps leave Spark as integer microseconds, so no time zone can shift an hour (both in
warehouse/spark_session.py, with the one-line errors).
Which engine runs is `WarehouseSettings.engine` ("duckdb" | "spark"); see warehouse/SCALING.md.
"""

from __future__ import annotations

import csv
import datetime as dt
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import DATASETS
from joulehouse.models.settings import ModelSettings
from joulehouse.warehouse.build import build_parameters
from joulehouse.warehouse.inventory import INVENTORY_COLUMNS, OPTIONAL_INVENTORY_COLUMNS, inventory_file
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.spark_dialect import SparkDialectError, SparkStatements, parameters
# spark_session and spark_task_session are imported from here too (joulehouse.daily, the tests)
from joulehouse.warehouse.spark_session import (
    SparkEngineError,
    _frame,
    _one_line_errors,
    spark_session,
    spark_task_session,
)
from joulehouse.warehouse.sqlio import SqlFiles

# The DuckDB relations Spark runs, rendered from warehouse/sql; the file reader of int_inventory
# becomes the view register_inventory makes.
GENERATED_RELATIONS = ("int_inventory", "int_gpu_samples_checked", "stg_gpu_samples", "fct_gpu_energy_hourly")
GENERATED = SparkStatements(SqlFiles("joulehouse.warehouse", "sql"), views={"read_csv": "inventory_csv"})
# The power fit's relations Spark runs, rendered from models/sql in the order power_suffstats creates
# them, with every call of models/sql's macro files inlined (the dynamic term; the fit's feature
# choice; the measure activity is read in, models.activity.ACTIVITY_MACROS: named, not imported, as
# warehouse/ loads no models' DuckDB code; tests/warehouse/test_spark_dialect.py checks the list names
# every macro file).
GENERATED_MODEL_RELATIONS = ("gpu_activity_streams", "power_input_chosen", "power_feature_choice",
                             "power_feature_rows", "power_features", "power_suffstats")
GENERATED_MODELS = SparkStatements(SqlFiles("joulehouse.models", "sql"),
                                   macros=("power_dynamic_ratio", "fit_feature_choice", "activity_of_kind",
                                           "fit_activity_kind", "holdout_from_epoch_s", "covered_hours"))
# Spark's type of each Arrow type of the lake's schemas (collectors/schema.py), for a column no file has.
SPARK_TYPES = {"timestamp[us, tz=UTC]": "timestamp", "string": "string", "int8": "tinyint", "int16": "smallint",
               "int32": "int", "int64": "bigint", "float": "float", "double": "double", "bool": "boolean"}
# The columns of power_stored_hours that power_suffstats.sql reads (fct_power_fit_sums_hourly's):
# the reference path Spark runs stores no sums, so the view is empty.
STORED_HOURS_SCHEMA = ("gpu_model string, sm_clock_mhz int, n bigint, "
                       + ", ".join(f"{c} double" for c in ("s1", "sa", "s3", "s4", "s11", "s1a", "s13", "s14", "saa",
                                                            "sa3", "sa4", "s33", "s34", "s44", "sy", "s1y", "say",
                                                            "s3y", "s4y", "syy")))
SPARK_SQL = SqlFiles("joulehouse.warehouse", "spark_sql")


@dataclass(frozen=True)
class SparkDayResult:
    """One day computed on Spark: frames with the DuckDB relations' columns and units."""

    gpu_energy_hourly: pl.DataFrame
    power_suffstats: pl.DataFrame
    gpu_energy_daily: pl.DataFrame


def load_spark_sql(name: str) -> str:
    """The Spark text of `name`: rendered from warehouse/sql/<name>.sql for GENERATED_RELATIONS,
    from models/sql/<name>.sql for GENERATED_MODEL_RELATIONS, else warehouse/spark_sql/<name>.sql
    as written, without a trailing semicolon."""
    try:
        if name in GENERATED_RELATIONS:
            return GENERATED.text(name)
        return GENERATED_MODELS.text(name) if name in GENERATED_MODEL_RELATIONS else SPARK_SQL.body(name)
    except (FileNotFoundError, SparkDialectError) as exc:
        raise SparkEngineError(str(exc)) from None


def register_lake(spark: Any, lake: str | Path) -> None:
    """Temp view raw_gpu_samples over `<lake>/gpu_samples` (Hive partitions date, host).

    An s3:// lake needs Spark's S3A connector (hadoop-aws) on the cluster: the URL is passed as
    s3a://, the scheme Hadoop serves."""
    root = str(lakefs.lake_root(lake))
    if root.startswith("s3://"):
        root = "s3a://" + root.removeprefix("s3://")
    path = f"{root}/gpu_samples"
    try:
        frame = spark.read.option("basePath", path).parquet(path)
    except Exception as exc:  # py4j/analysis errors: name the lake
        raise SparkEngineError(f"Spark cannot read the lake's gpu_samples at {path}: {exc}") from None
    # a documented column no file has is NULL, as the DuckDB build's lake contract reads it: the
    # relations name the optional columns (stg_gpu_samples excludes the device's limits by name)
    absent = [f for f in DATASETS["gpu_samples"] if f.name not in frame.columns]
    if absent:
        from pyspark.sql import functions as spark_functions

        frame = frame.withColumns({f.name: spark_functions.lit(None).cast(SPARK_TYPES[str(f.type)]) for f in absent})
    frame.createOrReplaceTempView("raw_gpu_samples")


def register_inventory(spark: Any, settings: WarehouseSettings) -> bool:
    """Temp views inventory_csv (the site inventory as text, header checked as the DuckDB build
    checks it) and int_inventory (rendered from warehouse/sql). The file is read here, not by
    Spark, so a cluster's executors need no access to it. True when an inventory was found."""
    with tempfile.TemporaryDirectory(prefix="jh-spark-") as scratch:
        path, found = inventory_file(settings.inventory_path, Path(scratch))
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
    columns = INVENTORY_COLUMNS + OPTIONAL_INVENTORY_COLUMNS
    schema = ", ".join(f"`{c}` string" for c in columns)
    spark.createDataFrame([tuple(r.get(c) for c in columns) for r in rows], schema) \
        .createOrReplaceTempView("inventory_csv")
    _view(spark, "int_inventory", {})
    return found


def _day_parameters(spark: Any, day: dt.date, settings: WarehouseSettings, now: dt.datetime) -> dict:
    # Spark builds every host at once (DuckDB a batch at a time). An empty list has no element
    # type to bind, and no host is named "": [""] selects no reading, as an empty batch would.
    hosts = [r[0] for r in spark.sql(load_spark_sql("lake_hosts"), args={"day": day}).collect()]
    return {**build_parameters(day, settings, now, ""), "hosts": hosts or [""]}


def _view(spark: Any, name: str, params: Mapping[str, Any], view: str | None = None) -> Any:
    text = load_spark_sql(name)
    wanted = parameters(text)
    missing = [p for p in wanted if p not in params]
    if missing:
        raise SparkEngineError(f"{name}: no value for parameters {missing}")
    frame = spark.sql(text, args={p: params[p] for p in wanted})
    frame.createOrReplaceTempView(view or name)
    return frame


def check_samples(spark: Any, day: dt.date, settings: WarehouseSettings, now: dt.datetime | None = None) -> Any:
    """Temp view int_gpu_samples_checked of `day`: its readings and the margin beside it, each
    with its quarantine reason (NULL: clean) and its stream's next energy reading (register_lake
    and register_inventory first)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    frame = _view(spark, "int_gpu_samples_checked", _day_parameters(spark, day, settings, now))
    # Computed once and read back as rows: each later reference would repeat the whole plan (the
    # relation reads its own CTEs several times), and Spark's analyzer takes minutes, or runs out
    # of stack, over a union of a few such days.
    frame = frame.localCheckpoint()
    frame.createOrReplaceTempView("int_gpu_samples_checked")
    return frame


def clean_samples(spark: Any, first_day: dt.date, last_day: dt.date, settings: WarehouseSettings,
                  now: dt.datetime | None = None) -> Any:
    """Temp view stg_gpu_samples: the clean readings of first_day..last_day, each day checked as
    the DuckDB build checks it (so, as there, a reading's neighbours across midnight count)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    union = None
    for i in range((last_day - first_day).days + 1):
        day = first_day + dt.timedelta(days=i)
        check_samples(spark, day, settings, now)
        # each frame keeps the plan of its own day's view, which the next day's replaces
        rows = _view(spark, "stg_gpu_samples", {"day": day})
        union = rows if union is None else union.unionByName(rows)
    union = union.cache()  # power_features reads it twice (its streams and its rows)
    union.createOrReplaceTempView("stg_gpu_samples")
    return union


def gpu_energy_hourly(spark: Any, day: dt.date, settings: WarehouseSettings,
                      now: dt.datetime | None = None) -> pl.DataFrame:
    """fct_gpu_energy_hourly of `day` on Spark (register_lake and register_inventory first): one
    row per GPU-hour, energy_kwh [kWh], avg_power_w [W], coverage_ratio [0..1], hour_at UTC. The
    temp view stays cached for gpu_energy_daily."""
    now = now or dt.datetime.now(dt.timezone.utc)
    check_samples(spark, day, settings, now)
    frame = _view(spark, "fct_gpu_energy_hourly", build_parameters(day, settings, now, "")).cache()
    return _frame(frame, ["gpu_uuid", "hour_at"])


def power_parameters(day: dt.date, models: ModelSettings) -> dict[str, Any]:
    """The values models.power_features binds (or sets as variables) for the reference path's
    relations of the window ending on `day`, under the names models/sql's files read them by."""
    first_day = day - dt.timedelta(days=models.history_days - 1)
    return {
        "first_day": first_day, "last_day": day, "day": day, "history_days": int(models.history_days),
        "holdout_fraction": float(models.holdout_fraction), "holdout_max_days": float(models.holdout_max_days),
        # no sums are stored on this path: every row of the window is read (models.power_features._build_features)
        "power_features_day": day, "power_features_history_days": int(models.history_days),
        "power_features_rows_from_day": first_day,
        "power_features_max_interval_s": float(models.max_sample_interval_s),
        "alpha_min": float(models.alpha_min), "alpha_step": float(models.alpha_step), "alpha_count": int(models.alpha_count),
        "gamma_min": float(models.activity_exponent_min), "gamma_step": float(models.activity_exponent_step),
        "gamma_count": int(models.activity_exponent_count),
        "hold_grid_s": [float(x) for x in models.activity_hold_grid_s],
    }


def power_suffstats(spark: Any, day: dt.date, warehouse: WarehouseSettings, models: ModelSettings,
                    now: dt.datetime | None = None) -> pl.DataFrame:
    """power_suffstats over the clean readings of the `models.history_days` up to `day`:
    n, X'X, X'y, y'y per GPU model and shape (the fit in models.coefficients reads these).
    The views of models.power_features.build_power_features, each from the same models/sql file."""
    params = power_parameters(day, models)
    clean = clean_samples(spark, params["first_day"], day, warehouse, now)
    # models.power_features.input_view: one stream per GPU and day (where a GPU has one, all its rows)
    clean.createOrReplaceTempView("stream_input_samples")
    clean.createOrReplaceTempView("power_samples_source")
    # Each view is computed once and stands in its later readers' plans as its rows: left as
    # plans, every reference re-expands the chain below it, and the analyser of the suffstats
    # query ran out of the driver's 1 GB heap (a 16-GPU day with the default shape grid).
    streams = _materialised(_view(spark, "gpu_activity_streams", params), "power_input_streams")
    _view(spark, "power_input_chosen", params, view="power_input_samples")
    choice = _materialised(_view(spark, "power_feature_choice", params), "power_feature_choice")
    spark.createDataFrame([], STORED_HOURS_SCHEMA).createOrReplaceTempView("power_stored_hours")
    _view(spark, "power_feature_rows", params)
    features = _materialised(_view(spark, "power_features", params), "power_features")
    try:
        stats = _view(spark, "power_suffstats", params)
        return _frame(stats, ["gpu_model", "alpha", "activity_exponent", "activity_hold_s"])
    finally:
        for frame in (features, choice, streams, clean):
            frame.unpersist()


def _materialised(frame: Any, view: str) -> Any:
    """`frame` computed now and kept on the executors (lineage cut), registered as `view`."""
    kept = frame.localCheckpoint(eager=True)
    kept.createOrReplaceTempView(view)
    return kept


def gpu_energy_daily(spark: Any) -> pl.DataFrame:
    """The day's GPU energy per host and model from the fct_gpu_energy_hourly view on Spark."""
    return _frame(spark.sql(load_spark_sql("gpu_energy_daily")), ["day", "host", "gpu_model"])


def run_day(spark: Any, lake: str | Path, day: dt.date, warehouse: WarehouseSettings,
            models: ModelSettings, now: dt.datetime | None = None) -> SparkDayResult:
    """Every Spark step for `day` over `lake`: hourly energy, power-model sums, daily rollup."""
    register_lake(spark, lake)
    with _one_line_errors(day, lake):
        register_inventory(spark, warehouse)
        hourly = gpu_energy_hourly(spark, day, warehouse, now)
        daily = gpu_energy_daily(spark)
        stats = power_suffstats(spark, day, warehouse, models, now)
    return SparkDayResult(gpu_energy_hourly=hourly, power_suffstats=stats, gpu_energy_daily=daily)


# --- The DAG's build task with engine = "spark" -------------------------------------------------

ENGINES = ("duckdb", "spark")
# fct_gpu_energy_hourly's columns in warehouse/sql/fct_gpu_energy_hourly.sql's order, with the
# DuckDB types they land as (TIMESTAMPTZ, DATE, VARCHAR, DOUBLE, BIGINT): the frame handed to
# build_day(computed=...) creates the table on a first build, so its types must be DuckDB's own.
FCT_GPU_ENERGY_HOURLY_SCHEMA = {
    "hour_at": pl.Datetime("us", "UTC"), "day": pl.Date, "host": pl.String, "gpu_uuid": pl.String,
    "gpu_model": pl.String, "energy_kwh": pl.Float64, "avg_power_w": pl.Float64,
    "coverage_ratio": pl.Float64, "energy_source": pl.String, "source": pl.String,
    "n_samples": pl.Int64, "n_sources": pl.Int64,
}


def check_engine(engine: str) -> str:
    """`engine` if the pipeline runs it ("duckdb" | "spark"); else ValueError naming the setting."""
    if engine not in ENGINES:
        raise ValueError(f"warehouse.engine = {engine!r}; expected one of {', '.join(map(repr, ENGINES))}")
    return engine


def as_duckdb_gpu_energy_hourly(frame: pl.DataFrame) -> pl.DataFrame:
    """Spark's hourly GPU energy with exactly fct_gpu_energy_hourly's columns, order and types."""
    missing = [c for c in FCT_GPU_ENERGY_HOURLY_SCHEMA if c not in frame.columns]
    if missing:
        raise SparkEngineError(f"Spark's fct_gpu_energy_hourly lacks columns {missing}")
    return frame.select(pl.col(name).cast(dtype, strict=True) for name, dtype in FCT_GPU_ENERGY_HOURLY_SCHEMA.items())


def computed_relations(spark: Any, lake: str | Path, day: dt.date, settings: WarehouseSettings,
                       now: dt.datetime) -> dict[str, pl.DataFrame]:
    """The day's relations Spark computes for warehouse.build.build_day(computed=...): today
    fct_gpu_energy_hourly (kWh per GPU-hour). `now` must be the one build_day gets, so both
    engines apply the same future-timestamp rule."""
    register_lake(spark, lake)
    with _one_line_errors(day, lake):
        register_inventory(spark, settings)
        hourly = gpu_energy_hourly(spark, day, settings, now)
    return {"fct_gpu_energy_hourly": as_duckdb_gpu_energy_hourly(hourly)}


def fit_suffstats(spark: Any, lake: str | Path, day: dt.date, warehouse: WarehouseSettings,
                  models: ModelSettings, now: dt.datetime) -> list[dict]:
    """The power fit's training sums for the window ending on `day`, computed on Spark over the
    lake, as rows for models.power.fit_day(suffstats=...). The lake's readings are checked with
    the same quarantine rules (and this `now`) as the warehouse's clean rows."""
    register_lake(spark, lake)
    with _one_line_errors(day, lake):
        register_inventory(spark, warehouse)
        return power_suffstats(spark, day, warehouse, models, now).to_dicts()
