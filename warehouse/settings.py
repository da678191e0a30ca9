"""[warehouse]: the DuckDB warehouse over the lake, its data-quality rules and its engine.

A section of the settings file (joulehouse.settings assembles them; collectors.settings reads
them); every value is checked when read.
"""

from __future__ import annotations

import os
import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from joulehouse.collectors.settings import (Count, Finite, Location, LocationOrNone, NonNegative, NonNegativeInt, Positive, Ratio,
                                            Seconds, Text, section)

# One ad hoc query's wall time: at most a day; past about 1e9 s the timer thread raised
# OverflowError and no limit held.
QueryTimeout = Annotated[float, Field(gt=0, le=86400, allow_inf_nan=False)]

_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$|^\s*(\d+(?:\.\d+)?)\s*%\s*$", re.IGNORECASE)
_UNIT_BYTES = {"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
MIN_MEMORY_BYTES = 64e6  # below this DuckDB cannot hold one vector per column of a build
# above this DuckDB refuses the SET ("value is too large") and setrlimit overflows a C long: a
# traceback at the first query or build, where the settings said nothing
MAX_SIZE_BYTES = 1e15


def _size(text: str, minimum_bytes: float, what: str) -> str:
    """A size in DuckDB's notation: 1GB, 512MB, 1.5GiB, or a share (80%); DuckDB would take "lots"
    or "1KB" as a memory limit only to fail at the first query."""
    found = _MEMORY.match(text)
    if not found:
        raise ValueError(f"{text!r} is not a size in DuckDB's notation (e.g. 1GB, 512MB, 1.5GiB, 80%)")
    if found.group(3) is not None:
        if not 1 <= float(found.group(3)) <= 100:
            raise ValueError(f"{text!r}: a share of the machine's {what} is 1% to 100%")
    elif float(found.group(1)) * _UNIT_BYTES[found.group(2).lower()] < minimum_bytes:
        raise ValueError(f"{text!r} is too little for DuckDB to work in: at least {minimum_bytes / 1e6:g}MB")
    elif float(found.group(1)) * _UNIT_BYTES[found.group(2).lower()] > MAX_SIZE_BYTES:
        raise ValueError(f"{text!r} is more than any machine holds: at most {MAX_SIZE_BYTES / 1e12:g}TB")
    return text.strip()


def size_bytes(text: str) -> float:
    """Bytes of a size in DuckDB's notation (a share, of this machine's physical memory)."""
    found = _MEMORY.match(_size(text, 0, "memory"))
    if found.group(3) is not None:
        return float(found.group(3)) / 100 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return float(found.group(1)) * _UNIT_BYTES[found.group(2).lower()]


MemorySize = Annotated[str, AfterValidator(lambda text: _size(text, MIN_MEMORY_BYTES, "memory"))]
DiskSize = Annotated[str, AfterValidator(lambda text: _size(text, 1e6, "disk"))]
Threads = Annotated[int, Field(ge=1, le=1024)]
# Spark's own notation (a JVM heap: 4g, 4096m), checked here: Spark read a typo only once the DAG's
# task started the JVM, and failed there in a long Java trace.
SparkMemory = Annotated[str, AfterValidator(lambda text: _spark_memory(text))]


def _spark_memory(text: str) -> str:
    if not re.fullmatch(r"[1-9][0-9]*[kmgt]", text):
        raise ValueError("expected Spark's notation: a whole number and k, m, g or t (4g, 4096m)")
    return text


@section
class WarehouseSettings:
    """DuckDB warehouse over the lake and the data-quality rules."""

    db_path: Location = Field("var/warehouse.duckdb", description="The DuckDB file; the reports go beside it (reports/).")
    inventory_path: LocationOrNone = Field("", description="Site inventory CSV (host, gpu_uuid, region, ...); empty: none.")
    max_gap_s: Seconds = Field(10.0, description="A gap between two readings longer than this is not bridged by the power integral, s.")
    max_power_over_limit_ratio: Positive = Field(
        1.5, description="Readings above this multiple of the power limit are physically implausible.")
    min_temp_c: Finite = Field(-20.0, description="Chip temperatures outside [min_temp_c, max_temp_c] are quarantined, C.")
    max_temp_c: Finite = 125.0
    # A sentinel clock (65535 from a driver that cannot read it, a kHz value stored as MHz) became
    # the model's f_max_mhz and scaled every other reading's clock ratio toward 0.
    max_sm_clock_mhz: Positive = Field(
        5000.0, description="SM clocks outside [0, max_sm_clock_mhz] are quarantined, MHz (the catalogue's GPUs boost to 3105).")
    max_mem_clock_mhz: Positive = Field(
        40000.0, description="Memory clocks outside [0, max_mem_clock_mhz] are quarantined, MHz (GDDR7 reads 14001).")
    max_clock_skew_s: NonNegative = Field(
        300.0, description="Tolerated host clock running ahead of the analytics side before a row counts as \"future\", s.")
    max_counter_gap_s: Seconds = Field(
        900.0, description="Energy-counter intervals up to this long are bridged (s): the counter measured the gap's\n"
                           "energy exactly; longer ones are not (a reboot can hide in them and restart the count).")
    max_power_abs_w: Positive = Field(3000.0, description="Power above this is implausible for any one GPU when its power limit is unknown, W.")
    max_quarantined_share: Ratio = Field(
        0.5, description="The data checks stop a day that quarantined more than this share of its readings (0..1): its\n"
                         "facts would stand on what little is left (99% quarantined had passed, with warnings only).")
    max_meter_gap_s: Seconds = Field(
        120.0, description="BMC (IPMI) and facility meters are read every 5 s to 1 min: gaps up to this are bridged, s.")
    threads: Threads = Field(2, description="DuckDB threads of the daily build and of `joulehouse sql` (1-1024).")
    memory_limit: MemorySize = Field(
        "1GB", description="DuckDB memory limit (DuckDB's notation: 4GB, 512MB). With batches of 3.5 M readings a 256-GPU\n"
                           "fleet-day at 1 Hz peaks at 1.3 GB in all (4.2 GB at 4GB with 8 hosts) in about the same time:\n"
                           "a larger limit lets DuckDB hold more, not go faster (warehouse/SCALING.md).")
    build_hosts_per_batch: Count = Field(
        64, description="The build checks and pairs the readings of at most this many hosts at a time ...")
    build_readings_per_batch: Count = Field(
        3_500_000, description="... and at most this many readings (counted from the day's Parquet footers; 4 hosts x 8 GPUs\n"
                               "at 1 Hz: 2.8-3.1 M), so the rows one sort holds stay within memory_limit and each batch's\n"
                               "fixed cost stays a small part of it whatever the fleet's size or sampling rate.")
    compact_lake: bool = Field(
        True, description="Before the build, rewrite each host's day in the (local, central) lake as one file per\n"
                          "dataset: the collector's 300 s files take 44-52% more bytes and build 18% slower\n"
                          "(warehouse/lake_compact.py). Off for an object-store lake or one the pipeline may not write.")
    engine: Literal["duckdb", "spark"] = Field(
        "duckdb", description="Engine of the heavy daily SQL (hourly GPU energy, power-model sums, daily rollup):\n"
                              "\"duckdb\" (one machine, the default) or \"spark\" (the optional [spark] extra; warehouse/SCALING.md).")
    spark_master: Text = Field(
        "local[2]", description="Spark master URL when engine = \"spark\" (local[N] on one machine, spark://host:7077 on a cluster).")
    spark_driver_memory: SparkMemory = Field(
        "4g", description="The Spark driver's JVM heap when engine = \"spark\" (spark.driver.memory; Spark's notation: 4g,\n"
                          "4096m). On a local[N] master the driver does all the work: at Spark's own 1g the demo's\n"
                          "32-GPU day stopped with SparkOutOfMemoryError.")
    readings_retention_days: NonNegativeInt = Field(
        35, description="Days of clean readings (stg_gpu_samples) the warehouse keeps, counted back from the\n"
                        "newest day built; older days' readings files are deleted by a later build (the lake keeps\n"
                        "them, and every day's energy, checks, fits and sums stay). 0 keeps every day. At 1 Hz a GPU\n"
                        "adds about 1 MB a day of readings files, so without it they grow with history; it must cover\n"
                        "the days the models re-read (joulehouse.settings checks it against them).")
    readings_superseded_keep_s: NonNegative = Field(
        172800.0, description="Readings files no longer listed (a day rebuilt, or past the retention) are deleted by a\n"
                              "build this long after they were taken off the list, s: a reader holding an older snapshot\n"
                              "of the warehouse open keeps reading them meanwhile (warehouse/readings.py). Two days: a\n"
                              "notebook left open over two nightly runs (an hour lost every readings query after the\n"
                              "second, the retention's oldest day gone under it).")

    query_memory_limit: MemorySize = Field(
        "1GB", description="Memory one `joulehouse sql` query may use (DuckDB's notation); past it the query stops with\n"
                           "an error instead of pressing the host the DAG runs on. DuckDB does not count every\n"
                           "allocation (a huge string), so the command also caps its process's data at twice this\n"
                           "plus 512 MB more than it held before the query (RLIMIT_DATA).")
    query_spill_limit: DiskSize = Field(
        "4GB", description="Disk one `joulehouse sql` query may spill to (a large sort or join), in a private temporary\n"
                           "folder deleted after it; past it the query stops instead of filling the disk.")
    query_timeout_s: QueryTimeout = Field(
        300.0, description="Wall time one `joulehouse sql` query may run, fetching included, before it is interrupted, s.")

    @model_validator(mode="after")
    def _temperatures_in_order(self) -> WarehouseSettings:
        if self.min_temp_c >= self.max_temp_c:
            raise ValueError(f"[warehouse] min_temp_c = {self.min_temp_c} must be below max_temp_c = {self.max_temp_c}")
        return self
