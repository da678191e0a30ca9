"""The jobs that held a GPU on one UTC day, found alike by the efficiency step and the accounts.

The lake's jobs dataset is partitioned by the UTC date of each row's `started_at`
(collectors/schema.py TIME_COLUMN; a pod still running is rewritten in its start's partition with
its later end, collectors/sources/dcgm_pods.py), so a job running into a day from an earlier one
lies in an earlier partition: it is found by its interval, in the date= partitions from
`job_max_days` before the day to the day. Reading every partition would grow with the lake's
history day after day, so that bound is a setting (models.job_max_days; 0 reads them all).

models.efficiency (fct_job_energy_hourly: the jobs' measured shares of each GPU-hour's energy) and
reports.accounts (acct_jobs.sql: the jobs the GPU-hours are split among) both stage their jobs with
`stage_day_jobs`, from the same relation under the same bound (joulehouse.daily passes them the one
setting), so they never disagree about who held a GPU-hour: a job started more than job_max_days
before the day is missing from both (its GPU-hours go to the other jobs of the GPU or the
unallocated line) rather than measured away by one and charged a share of nothing by the other.
"""

from __future__ import annotations

import datetime as dt
from contextlib import nullcontext

import duckdb

from joulehouse.models.settings import JOB_MAX_DAYS
from joulehouse.models.sql import SQL
from joulehouse.warehouse.lake_contract import reading_partitions
from joulehouse.warehouse.sqlio import alias_view, columns_of, relation_exists

# The first of these that exists holds the jobs (the warehouse's raw_jobs reads the lake; the
# others are tables a caller made).
JOBS_RELATIONS = ("stg_jobs", "raw_jobs", "jobs")


def first_partition(day: dt.date, job_max_days: int = JOB_MAX_DAYS) -> dt.date:
    """The earliest date= partition read for `day`'s jobs (0 days: every partition)."""
    if job_max_days < 0:
        raise ValueError(f"job_max_days = {job_max_days}: expected 0 (every partition) or more")
    return dt.date.min if job_max_days == 0 else day - dt.timedelta(days=job_max_days)


def jobs_relation(con: duckdb.DuckDBPyConnection) -> str | None:
    """The relation jobs are read from: the first of JOBS_RELATIONS that exists, or None."""
    return next((name for name in JOBS_RELATIONS if relation_exists(con, name)), None)


def stage_day_jobs(con: duckdb.DuckDBPyConnection, table: str, day: dt.date,
                   job_max_days: int = JOB_MAX_DAYS) -> str | None:
    """(Re)create the temp table `table`: the jobs relation's rows whose interval overlaps `day`
    (a row without an end too: the reader decides what it holds) among those started at most
    `job_max_days` before it, with every column of the jobs contract (NULL where the relation
    lacks one; models/sql/day_jobs.sql). Returns the relation read, or None (then no rows). The
    lake's partitions read are checked against its contract first (LakeContractError names the
    file and the column): the build checked only the day and its neighbours."""
    source = jobs_relation(con)
    with reading_job_partitions(con, source, first_partition(day, job_max_days), day):
        _stage(con, table, source, day, job_max_days)
    return source


def reading_job_partitions(con: duckdb.DuckDBPyConnection, source: str | None, first: dt.date, day: dt.date):
    """Within the block, the lake's raw_jobs reads the partitions `first` (dt.date.min: every one)
    to `day` only, checked against the contract (warehouse.lake_contract.reading_partitions); a
    table of jobs is read as it is."""
    if source != "raw_jobs":
        return nullcontext()
    return reading_partitions(con, "jobs", None if first == dt.date.min else first, day)


def _stage(con: duckdb.DuckDBPyConnection, table: str, source: str | None, day: dt.date, job_max_days: int) -> None:
    SQL.temp_view(con, "day_jobs_columns", "day_jobs_columns")
    if source is None:
        alias_view(con, "day_jobs_source", "day_jobs_columns")
    elif "date" in columns_of(con, source):
        alias_view(con, "day_jobs_source", source)  # the lake's date= partition: only those files are read
    else:
        alias_view(con, "day_jobs_undated", source)  # a table: its rows dated as the writer would place them
        SQL.temp_view(con, "day_jobs_source", "day_jobs_dated")
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    SQL.temp_table(con, table, "day_jobs", {"first_date": first_partition(day, job_max_days), "day": day,
                                            "day_start": start, "day_end": start + dt.timedelta(days=1)})
