"""The heavy daily SQL on Apache Spark, over the same Hive-partitioned lake as DuckDB.

Runs warehouse/spark_sql/*.sql (Spark dialect versions of the DuckDB relations, one per file):
the quarantine rules, the hourly GPU energy (kWh per GPU-hour), the power model's sufficient
statistics (sums per GPU model and shape), and the day's GPU energy per host and model. Results
come back as polars frames with the same columns and units as the DuckDB relations, so the rest
of the pipeline (fitting, accounting, reports) does not know which engine ran.

Spark is an optional extra (`pip install joulehouse[spark]`, Java 17): pyspark is imported only
inside these functions. The lake is read with partition discovery (`basePath`), so the typed
`date` column prunes files exactly as DuckDB's `hive_partitioning` does. Timestamps are handled
as integer microseconds (UTC) inside the SQL, so the session time zone cannot shift an hour.
Which engine runs is `WarehouseSettings.engine` ("duckdb" | "spark"); see warehouse/SCALING.md.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from joulehouse.collectors import lakefs
from joulehouse.models.settings import ModelSettings
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.sqlio import SqlFiles

SPARK_SQL = SqlFiles("joulehouse.warehouse", "spark_sql")
US_PER_S = 1_000_000
US_PER_DAY = 86_400 * US_PER_S
_PANDAS_WARNING = "PySpark does not yet fully support pandas"  # pyspark 4.3 with pandas 3; we never use pandas


class SparkEngineError(RuntimeError):
    """Spark could not run a step; the message names the step, the day and the cause."""


@dataclass(frozen=True)
class SparkDayResult:
    """One day computed on Spark: frames with the DuckDB relations' columns and units."""

    gpu_energy_hourly: pl.DataFrame
    power_suffstats: pl.DataFrame
    gpu_energy_daily: pl.DataFrame


def load_spark_sql(name: str) -> str:
    """The text of warehouse/spark_sql/<name>.sql, without a trailing semicolon."""
    try:
        return SPARK_SQL.body(name)
    except FileNotFoundError as exc:
        raise SparkEngineError(str(exc)) from None


@contextmanager
def _quiet_pandas_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
        yield


def spark_session(master: str = "local[2]", app_name: str = "joulehouse") -> Any:
    """A SparkSession in UTC with a small shuffle width (one machine's cores unless a cluster).

    Needs pyspark (the [spark] extra) and Java 17; SPARK_LOCAL_IP defaults to 127.0.0.1 for a
    local master so a machine without a resolvable host name still starts."""
    try:
        with _quiet_pandas_warning():
            from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkEngineError(f"engine = 'spark' needs pyspark: pip install 'joulehouse[spark]' ({exc})") from None
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with _quiet_pandas_warning():
        return (
            SparkSession.builder.master(master).appName(app_name)
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4" if master.startswith("local") else "200")
            .config("spark.sql.sources.partitionColumnTypeInference.enabled", "true")
            # An overflow or a bad cast is an error, as in DuckDB, whatever the cluster's defaults
            # say: without ANSI mode a DECIMAL that overflows becomes NULL and sum() skips it.
            .config("spark.sql.ansi.enabled", "true")
            .getOrCreate()
        )


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
    frame.createOrReplaceTempView("raw_gpu_samples")


def _checked_parameters(first_day: dt.date, last_day: dt.date, settings: WarehouseSettings,
                        now: dt.datetime) -> dict:
    margin_s = max(settings.max_gap_s, settings.max_counter_gap_s, settings.max_meter_gap_s)
    if margin_s >= 86400:
        raise SparkEngineError(f"the longest bridged gap = {margin_s} s; expected less than one day")
    first_us = (first_day - dt.date(1970, 1, 1)).days * US_PER_DAY
    end_us = ((last_day - dt.date(1970, 1, 1)).days + 1) * US_PER_DAY
    return {
        "first_day": first_day, "last_day": last_day, "first_us": first_us, "end_us": end_us,
        "margin_us": int(round(margin_s * US_PER_S)),
        "now_us": int(round(now.timestamp() * US_PER_S)),
        "max_clock_skew_us": int(round(settings.max_clock_skew_s * US_PER_S)),
        "max_power_over_limit_ratio": float(settings.max_power_over_limit_ratio),
        "max_power_abs_w": float(settings.max_power_abs_w),
        "min_temp_c": float(settings.min_temp_c), "max_temp_c": float(settings.max_temp_c),
    }


def _view(spark: Any, name: str, args: dict, view: str | None = None) -> Any:
    frame = spark.sql(load_spark_sql(name), args=args)
    frame.createOrReplaceTempView(view or name)
    return frame


def _frame(spark_frame: Any, order: list[str]) -> pl.DataFrame:
    columns = spark_frame.columns
    rows = [tuple(r) for r in spark_frame.collect()]
    frame = pl.DataFrame(rows, schema=columns, orient="row", infer_schema_length=None)
    return frame.sort(order, nulls_last=True) if rows else frame


def check_samples(spark: Any, first_day: dt.date, last_day: dt.date, settings: WarehouseSettings,
                  now: dt.datetime | None = None) -> None:
    """Temp view int_gpu_samples_checked: every reading of [first_day, last_day] plus the margin,
    with its quarantine reason (NULL: clean), cached since each later step reads it."""
    now = now or dt.datetime.now(dt.timezone.utc)
    frame = _view(spark, "int_gpu_samples_checked", _checked_parameters(first_day, last_day, settings, now))
    frame.cache()


def gpu_energy_hourly(spark: Any, day: dt.date, settings: WarehouseSettings,
                      now: dt.datetime | None = None) -> pl.DataFrame:
    """fct_gpu_energy_hourly of `day` on Spark (raw_gpu_samples must be registered): one row per
    GPU-hour, energy_kwh [kWh], avg_power_w [W], coverage_ratio [0..1], hour_at UTC."""
    check_samples(spark, day, day, settings, now)
    day_index = (day - dt.date(1970, 1, 1)).days
    frame = _view(spark, "fct_gpu_energy_hourly", {
        "day": day, "first_hour": day_index * 24, "end_hour": (day_index + 1) * 24,
        "max_gap_s": float(settings.max_gap_s), "max_counter_gap_s": float(settings.max_counter_gap_s),
        "max_power_over_limit_ratio": float(settings.max_power_over_limit_ratio),
        "max_power_abs_w": float(settings.max_power_abs_w),
    })
    hourly = _frame(frame, ["gpu_uuid", "hour_index"])
    hour_at = (pl.from_epoch(pl.col("hour_index").cast(pl.Int64) * 3600, time_unit="s")
               .dt.replace_time_zone("UTC").dt.cast_time_unit("us").alias("hour_at"))
    return hourly.with_columns(hour_at).select("hour_at", pl.exclude("hour_at", "hour_index"))


def shape_grid_rows(models: ModelSettings) -> list[tuple[bool, float, float, float]]:
    """The dynamic term's shape grid, as models/sql/power_suffstats.sql builds it."""
    rows = [(True, models.alpha_min + models.alpha_step * i, 1.0, 0.0) for i in range(models.alpha_count)]
    rows += [(False, 1.0, models.activity_exponent_min + models.activity_exponent_step * i, float(hold))
             for i in range(models.activity_exponent_count) for hold in models.activity_hold_grid_s]
    return rows


def power_suffstats(spark: Any, day: dt.date, warehouse: WarehouseSettings, models: ModelSettings,
                    now: dt.datetime | None = None) -> pl.DataFrame:
    """power_suffstats over the clean readings of the `models.history_days` up to `day`:
    n, X'X, X'y, y'y per GPU model and shape (the fit in models.coefficients reads these)."""
    first_day = day - dt.timedelta(days=models.history_days - 1)
    check_samples(spark, first_day, day, warehouse, now)
    grid = spark.createDataFrame(shape_grid_rows(models),
                                 "has_clock boolean, alpha double, activity_exponent double, activity_hold_s double")
    grid.createOrReplaceTempView("power_shape_grid")
    features = _view(spark, "power_features", {
        "day": day, "history_days": int(models.history_days), "holdout_fraction": float(models.holdout_fraction),
        "holdout_max_days": float(models.holdout_max_days)})
    features.cache()
    try:
        stats = spark.sql(load_spark_sql("power_suffstats"))
        return _frame(stats, ["gpu_model", "alpha", "activity_exponent", "activity_hold_s"])
    finally:
        features.unpersist()


def gpu_energy_daily(spark: Any) -> pl.DataFrame:
    """The day's GPU energy per host and model from the fct_gpu_energy_hourly view on Spark."""
    return _frame(spark.sql(load_spark_sql("gpu_energy_daily")), ["day", "host", "gpu_model"])


def run_day(spark: Any, lake: str | Path, day: dt.date, warehouse: WarehouseSettings,
            models: ModelSettings, now: dt.datetime | None = None) -> SparkDayResult:
    """Every Spark step for `day` over `lake`: hourly energy, power-model sums, daily rollup."""
    register_lake(spark, lake)
    with _one_line_errors(day, lake):
        hourly = gpu_energy_hourly(spark, day, warehouse, now)
        daily = gpu_energy_daily(spark)
        stats = power_suffstats(spark, day, warehouse, models, now)
    return SparkDayResult(gpu_energy_hourly=hourly, power_suffstats=stats, gpu_energy_daily=daily)


@contextmanager
def _one_line_errors(day: dt.date, lake: str | Path) -> Iterator[None]:
    """Spark's analysis and execution errors (py4j exceptions, pages long) as one SparkEngineError line."""
    try:
        yield
    except SparkEngineError:
        raise
    except Exception as exc:
        raise SparkEngineError(f"Spark failed on {day} over {lake}: {str(exc).splitlines()[0]}") from exc


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


def _check_java() -> None:
    # Without Java, pyspark waits for a gateway that never starts and ends in a long traceback.
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and (Path(java_home) / "bin" / "java").exists()):
        raise SparkEngineError("engine = 'spark' needs Java 17: no `java` on PATH and no JAVA_HOME/bin/java")


@contextmanager
def spark_task_session(master: str, app_name: str = "joulehouse") -> Iterator[Any]:
    """One SparkSession for one DAG task, stopped when the task's block ends (JVM start costs
    seconds, so a task makes one and reuses it). Raises SparkEngineError in one line when pyspark
    or Java is missing or the session does not start."""
    _check_java()
    try:
        spark = spark_session(master, app_name)
    except SparkEngineError:
        raise
    except Exception as exc:  # py4j / gateway errors: one line naming the master
        raise SparkEngineError(f"Spark did not start on master {master!r}: {str(exc).splitlines()[0]}") from None
    try:
        yield spark
    finally:
        with _quiet_pandas_warning():
            spark.stop()


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
        hourly = gpu_energy_hourly(spark, day, settings, now)
    return {"fct_gpu_energy_hourly": as_duckdb_gpu_energy_hourly(hourly)}


def fit_suffstats(spark: Any, lake: str | Path, day: dt.date, warehouse: WarehouseSettings,
                  models: ModelSettings, now: dt.datetime) -> list[dict]:
    """The power fit's training sums for the window ending on `day`, computed on Spark over the
    lake, as rows for models.power.fit_day(suffstats=...). The lake's readings are checked with
    the same quarantine rules (and this `now`) as the warehouse's clean rows."""
    register_lake(spark, lake)
    with _one_line_errors(day, lake):
        return power_suffstats(spark, day, warehouse, models, now).to_dicts()
