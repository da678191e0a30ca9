"""Starting Spark and reading its answers back, for warehouse/spark_engine.py's relations.

A SparkSession in UTC (spark_session; one per DAG task, pyspark and Java checked first, stopped
when the task's block ends: spark_task_session); a Spark frame collected as a polars frame whose
timestamps leave Spark as integer microseconds and come back UTC, so no time zone can shift an
hour (_frame); Spark's pages-long py4j errors as one SparkEngineError line naming the day and
the lake (_one_line_errors).

Spark is an optional extra (`pip install joulehouse[spark]`, Java 17): pyspark is imported only
inside these functions.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

_PANDAS_WARNING = "PySpark does not yet fully support pandas"  # pyspark 4.3 with pandas 3; we never use pandas


class SparkEngineError(RuntimeError):
    """Spark could not run a step; the message names the step, the day and the cause."""


@contextmanager
def _quiet_pandas_warning() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PANDAS_WARNING, category=FutureWarning)
        yield


def spark_session(master: str = "local[2]", app_name: str = "joulehouse", driver_memory: str | None = None) -> Any:
    """A SparkSession in UTC with a small shuffle width (one machine's cores unless a cluster) and
    a driver heap of `driver_memory` (Spark's notation, [warehouse] spark_driver_memory; None:
    Spark's own). The heap holds only where this call starts the JVM.

    Needs pyspark (the [spark] extra) and Java 17; SPARK_LOCAL_IP defaults to 127.0.0.1 for a
    local master so a machine without a resolvable host name still starts."""
    try:
        with _quiet_pandas_warning():
            from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkEngineError(f"engine = 'spark' needs pyspark: pip install 'joulehouse[spark]' ({exc})") from None
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    with _quiet_pandas_warning():
        return (
            builder
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "4" if master.startswith("local") else "200")
            .config("spark.sql.sources.partitionColumnTypeInference.enabled", "true")
            # An overflow or a bad cast is an error, as in DuckDB, whatever the cluster's defaults
            # say: without ANSI mode a DECIMAL that overflows becomes NULL and sum() skips it.
            .config("spark.sql.ansi.enabled", "true")
            # The quarantine rules' CASE over every column, its IS NULL tests of the join keys and
            # the relation's self-joins made the optimizer's constraint propagation grow past the
            # driver's heap (OutOfMemoryError planning int_gpu_samples_checked; 13 minutes before
            # the key_missing rule): the constraints it infers prune nothing these plans need.
            .config("spark.sql.constraintPropagation.enabled", "false")
            .getOrCreate()
        )


def _check_java() -> None:
    # Without Java, pyspark waits for a gateway that never starts and ends in a long traceback.
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and (Path(java_home) / "bin" / "java").exists()):
        raise SparkEngineError("engine = 'spark' needs Java 17: no `java` on PATH and no JAVA_HOME/bin/java")


@contextmanager
def spark_task_session(master: str, app_name: str = "joulehouse", driver_memory: str | None = None) -> Iterator[Any]:
    """One SparkSession for one DAG task, stopped when the task's block ends (JVM start costs
    seconds, so a task makes one and reuses it). Raises SparkEngineError in one line when pyspark
    or Java is missing or the session does not start."""
    _check_java()
    try:
        spark = spark_session(master, app_name, driver_memory)
    except SparkEngineError:
        raise
    except Exception as exc:  # py4j / gateway errors: one line naming the master
        raise SparkEngineError(f"Spark did not start on master {master!r}: {str(exc).splitlines()[0]}") from None
    try:
        yield spark
    finally:
        with _quiet_pandas_warning():
            spark.stop()


def _frame(spark_frame: Any, order: list[str]) -> pl.DataFrame:
    # Timestamps leave Spark as microseconds: collect() would turn them into naive datetimes in
    # the Python process's local time zone.
    with _quiet_pandas_warning():
        from pyspark.sql import functions as F
        from pyspark.sql.types import TimestampType
    stamps = [f.name for f in spark_frame.schema.fields if isinstance(f.dataType, TimestampType)]
    selected = spark_frame.select([F.unix_micros(F.col(c)).alias(c) if c in stamps else F.col(c)
                                   for c in spark_frame.columns])
    rows = [tuple(r) for r in selected.collect()]
    frame = pl.DataFrame(rows, schema=spark_frame.columns, orient="row", infer_schema_length=None)
    frame = frame.with_columns(pl.col(c).cast(pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
                               for c in stamps)
    return frame.sort(order, nulls_last=True) if rows else frame


@contextmanager
def _one_line_errors(day: dt.date, lake: str | Path) -> Iterator[None]:
    """Spark's analysis and execution errors (py4j exceptions, pages long) as one SparkEngineError line."""
    try:
        yield
    except SparkEngineError:
        raise
    except Exception as exc:
        raise SparkEngineError(f"Spark failed on {day} over {lake}: {_first_line(exc)}") from exc


def _first_line(exc: Exception) -> str:
    # py4j's own first line ("An error occurred while calling o37.sql.") says nothing; the
    # Java exception's message follows it
    lines = [line.strip(": ") for line in str(exc).splitlines()
             if line.strip() and not line.startswith("An error occurred while calling")]
    return lines[0] if lines else type(exc).__name__

