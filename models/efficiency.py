"""Efficiency figures per job and per GPU model and power setting (energy per unit of work).

`build_efficiency(con, day)` writes `day`'s rows of three tables (models/sql/*.sql, delete-then-
insert, so re-running a day replaces only that day):
- fct_job_energy_hourly: per (hour, job, GPU): the job's share of the GPU-hour's energy (what the
  accounts split energy, operational carbon and energy cost by);
- fct_job_efficiency: per (job, GPU): energy (kWh, the GPU-hours' energy shared pro rata by
  measured power, a reading held by several jobs at once split among them; a job row seen twice
  counts once), work done (requests, tokens, samples, FLOPs), EPOE (requests/kWh), J/token,
  J/sample, FLOPs per W, and the power limit in force;
- fct_efficiency_setting_daily: the same ratios per (GPU model, power limit, stage, class).
Jobs come from the first of stg_jobs / raw_jobs / jobs that exists; a job started up to
`JOB_LOOKBACK_DAYS` before `day` is still seen when it runs into `day`.
"""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.warehouse.sqlio import create_temp_table, quoted_relation, relation_exists, replace_day, transaction
from joulehouse.models.sql import load_sql

JOBS_RELATIONS = ("stg_jobs", "raw_jobs", "jobs")
JOB_LOOKBACK_DAYS = 7
# in this order: the jobs' hourly energy, their day (its sum), the day per setting
TABLES = ("fct_job_energy_hourly", "fct_job_efficiency", "fct_efficiency_setting_daily")


def _columns(con: duckdb.DuckDBPyConnection, relation: str) -> set[str]:
    return {d[0] for d in con.execute(f"SELECT * FROM {quoted_relation(relation)} LIMIT 0").description}


def _stage_jobs(con: duckdb.DuckDBPyConnection, day: dt.date) -> str | None:
    """Copy the jobs that may touch `day` into the temp table eff_input_jobs; returns the source."""
    source = next((name for name in JOBS_RELATIONS if relation_exists(con, name)), None)
    if source is None:
        con.execute("CREATE OR REPLACE TEMP TABLE eff_input_jobs (job_id VARCHAR, host VARCHAR, gpu_uuid VARCHAR, "
                    "started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ, stage VARCHAR, workload_class VARCHAR, team VARCHAR, "
                    "requests_total BIGINT, tokens_total BIGINT, samples_total BIGINT, flops_total DOUBLE)")
        return None
    quoted = quoted_relation(source)
    if "date" in _columns(con, source):
        # Filter on the typed partition column so only the neighbouring days' files are opened.
        con.execute(f"CREATE OR REPLACE TEMP TABLE eff_input_jobs AS SELECT * FROM {quoted} "
                    "WHERE date BETWEEN CAST(? AS DATE) - ? AND CAST(? AS DATE)", [day, JOB_LOOKBACK_DAYS, day])
    else:
        con.execute(f"CREATE OR REPLACE TEMP TABLE eff_input_jobs AS SELECT * FROM {quoted}")
    return source


def build_efficiency(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, int]:
    """Write `day`'s rows of TABLES; returns rows per table.

    Needs stg_gpu_samples and fct_gpu_energy_hourly for `day` (warehouse.build.build_day)."""
    for needed in ("stg_gpu_samples", "fct_gpu_energy_hourly"):
        if not relation_exists(con, needed):
            raise ValueError(f"relation {needed!r} is missing; build the warehouse day {day} first")
    _stage_jobs(con, day)
    create_temp_table(con, "eff_holdings", load_sql("eff_holdings"), {"day": day})
    with transaction(con):
        return {table: replace_day(con, table, day, load_sql(table), {"day": day}) for table in TABLES}
