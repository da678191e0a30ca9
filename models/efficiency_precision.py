"""Efficiency the way the source compares it: by numeric precision and batch size, and in FLOPs per
watt made comparable across architectures.

`precision_efficiency_day(con, day)` writes `day`'s rows of
- fct_efficiency_precision_daily: energy per token, request and sample by GPU model x precision x
  batch, eta = throughput / power, the best batch per (GPU model, precision, unit) and what the
  other batches would have saved at it;
- fct_flops_per_watt_daily: sustained FP16-equivalent FLOPs per watt per GPU model and for the
  fleet, the chip temperature it was measured at, and the gain since the first day the warehouse
  holds against the source's goal of +20%.

FP16-equivalent: an operation at precision p counts as peak_fp16 / peak_p FP16 operations of the
GPU model that ran it (the datasheet dense peaks of models/gpu_catalogue.csv): the share of its
FP16 peak the GPU's work amounts to, whatever precision it ran in. FP8 and INT8 operations
(twice the FP16 rate on Hopper and Ada) count as half, TF32 as two on an A100 (156 vs 312 TFLOP/s),
FP32 by the FP32:FP16 ratio; INT4 runs at twice the INT8 rate where the GPU has INT4 units (Ampere,
Turing) and as INT8 elsewhere, so it counts as a quarter there and half elsewhere. A precision the
GPU has no units for runs at the one it falls back to (gpu_catalogue.FALLBACK). Jobs that do not
state their precision are counted at FP16 (factor 1) and the row says what share that is.
"""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.collectors.schema import JOB_PRECISIONS
from joulehouse.models.day_jobs import JOB_MAX_DAYS, stage_day_jobs
from joulehouse.models.gpu_catalogue import GpuSpec, find
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import relation_exists, replace_day, transaction

FLOPS_PER_W_GOAL_GAIN_PCT = 20.0  # the source's goal: 20% more FLOPs per watt
INT4_ARCHITECTURES = frozenset({"turing", "ampere"})  # INT4 tensor cores (dropped from Hopper)
FACTOR_TABLE = "flops_fp16_factor"
TABLES = ("fct_efficiency_precision_daily", "fct_flops_per_watt_daily")
OPTIONAL_JOB_COLUMNS = (("precision", "VARCHAR"), ("batch_size", "INTEGER"))
ADDED_COLUMNS = ("j_per_unit_se", "saving_low_kwh_per_day")


def fp16_factor(spec: GpuSpec, precision: str) -> float:
    """FP16 operations one operation at `precision` stands for on this GPU model (see the module doc)."""
    fp16, _ = spec.peak_tflops("fp16")
    if precision == "int4":
        int8, ran = spec.peak_tflops("int8")
        return fp16 / (2 * int8) if ran == "int8" and spec.architecture in INT4_ARCHITECTURES else fp16 / int8
    rate, _ = spec.peak_tflops(precision)
    return fp16 / rate


def create_factor_table(con: duckdb.DuckDBPyConnection, gpu_models: list[str]) -> str:
    """Temp table (gpu_model, precision, fp16_factor, peak_fp16_flops_per_w) for the known models."""
    con.execute(f'CREATE OR REPLACE TEMP TABLE {FACTOR_TABLE} (gpu_model VARCHAR, "precision" VARCHAR, '
                "fp16_factor DOUBLE, peak_fp16_flops_per_w DOUBLE)")
    rows = []
    for model in sorted(set(gpu_models)):
        spec = find(model)
        if spec is None:
            continue
        peak_per_w = spec.peak_tflops("fp16")[0] * 1e12 / spec.tdp_w
        rows += [(model, p, fp16_factor(spec, p), peak_per_w) for p in JOB_PRECISIONS]
    if rows:
        con.executemany(f"INSERT INTO {FACTOR_TABLE} VALUES (?, ?, ?, ?)", rows)
    return FACTOR_TABLE


def precision_efficiency_day(con: duckdb.DuckDBPyConnection, day: dt.date, *,
                             job_max_days: int = JOB_MAX_DAYS) -> dict[str, int]:
    """Write `day`'s rows of fct_efficiency_precision_daily and fct_flops_per_watt_daily; rows per table.
    `job_max_days`: models.job_max_days, as build_efficiency was given (the same jobs).
    Needs fct_job_efficiency for the day (models.efficiency.build_efficiency)."""
    if not relation_exists(con, "fct_job_efficiency"):
        raise ValueError(f"relation 'fct_job_efficiency' is missing; run the efficiency step for {day} first")
    stage_day_jobs(con, "eff_input_jobs", day, job_max_days)
    present = {r[0] for r in con.execute("DESCRIBE eff_input_jobs").fetchall()}
    for column, kind in OPTIONAL_JOB_COLUMNS:
        if column not in present:
            con.execute(f'ALTER TABLE eff_input_jobs ADD COLUMN "{column}" {kind}')
    models = [r[0] for r in con.execute("SELECT DISTINCT gpu_model FROM fct_job_efficiency WHERE day = ? "
                                        "AND gpu_model IS NOT NULL", [day]).fetchall()]
    create_factor_table(con, models)
    history = ("SELECT gpu_model, day, fp16_equivalent_flops_per_w FROM fct_flops_per_watt_daily"
               if relation_exists(con, "fct_flops_per_watt_daily", temporary=False) else
               "SELECT CAST(NULL AS VARCHAR) AS gpu_model, CAST(NULL AS DATE) AS day, "
               "CAST(NULL AS DOUBLE) AS fp16_equivalent_flops_per_w WHERE false")
    con.execute(f"CREATE OR REPLACE TEMP VIEW flops_per_watt_history AS {history}")
    params = {"fct_efficiency_precision_daily": {"day": day},
              "fct_flops_per_watt_daily": {"day": day, "goal_gain_pct": FLOPS_PER_W_GOAL_GAIN_PCT}}
    with transaction(con):
        if relation_exists(con, "fct_efficiency_precision_daily", temporary=False):
            # warehouses written before the jobs' spread was stated gain its columns (NULL on old days)
            for column in ADDED_COLUMNS:
                con.execute(f"ALTER TABLE fct_efficiency_precision_daily ADD COLUMN IF NOT EXISTS {column} DOUBLE")
        return {table: replace_day(con, table, day, load_sql(table), params[table]) for table in TABLES}
