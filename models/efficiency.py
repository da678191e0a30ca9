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
Jobs come from models.day_jobs.stage_day_jobs, as the accounts' do: the first of stg_jobs /
raw_jobs / jobs that exists, every job running on `day` that started at most `job_max_days`
(models.job_max_days) before it, so the measured shares and the accounts split a GPU-hour among
the same jobs. The jobs' shares weigh each reading by the time it stands for where the day's
energy bridged it: `warehouse` (WarehouseSettings) gives max_gap_s and max_counter_gap_s, the
bounds the day was built with (defaults: WarehouseSettings()'s).
"""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.warehouse.sqlio import create_temp_table, ensure_columns, relation_exists, replace_day, transaction
from joulehouse.models.day_jobs import JOB_MAX_DAYS, stage_day_jobs
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.settings import WarehouseSettings

# in this order: the jobs' hourly energy, their day (its sum), the day per setting
TABLES = ("fct_job_energy_hourly", "fct_job_efficiency", "fct_efficiency_setting_daily")
LATER_COLUMNS = {"fct_job_energy_hourly": {"measured_s": "DOUBLE"}, "fct_job_efficiency": {"measured_hours": "DOUBLE"}}


def build_efficiency(con: duckdb.DuckDBPyConnection, day: dt.date, *,
                     job_max_days: int = JOB_MAX_DAYS, warehouse: WarehouseSettings | None = None) -> dict[str, int]:
    """Write `day`'s rows of TABLES; returns rows per table. `job_max_days`: models.job_max_days,
    the same bound the accounts apply (models.day_jobs). `warehouse`: the settings the day was
    built with, so a reading weighs in the jobs' shares where the hour's energy bridged it
    (max_gap_s, max_counter_gap_s; None: the defaults).

    Needs stg_gpu_samples and fct_gpu_energy_hourly for `day` (warehouse.build.build_day)."""
    for needed in ("stg_gpu_samples", "fct_gpu_energy_hourly"):
        if not relation_exists(con, needed):
            raise ValueError(f"relation {needed!r} is missing; build the warehouse day {day} first")
    stage_day_jobs(con, "eff_input_jobs", day, job_max_days)
    create_temp_table(con, "eff_holdings", load_sql("eff_holdings"), {"day": day})
    warehouse = warehouse or WarehouseSettings()
    params = {table: {"day": day} for table in TABLES}
    params["fct_job_energy_hourly"] |= {"max_gap_s": float(warehouse.max_gap_s),
                                        "max_counter_gap_s": float(warehouse.max_counter_gap_s)}
    for table, columns in LATER_COLUMNS.items():  # tables stored before a column was added
        if relation_exists(con, table, temporary=False):
            ensure_columns(con, table, columns)
    with transaction(con):
        return {table: replace_day(con, table, day, load_sql(table), params[table]) for table in TABLES}
