"""A simulated week in which half of every host's GPUs get a power cap from day 3, built into a
warehouse, plus the same week without caps (the counterfactual: the simulator draws each GPU's
day from (seed, GPU, day) alone, so the uncapped run is exactly what the capped GPUs would have done)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import duckdb
from functools import cache

from joulehouse.settings import WarehouseSettings
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.collectors.sim.fleet import build_fleet
from joulehouse.models.efficiency import build_efficiency
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

START = dt.date(2026, 1, 1)
DAYS = 7
CAP_FROM = 2  # index of the first capped day: day 3
CAP_W = {"NVIDIA A100-SXM4-80GB": 250.0, "NVIDIA H100 80GB HBM3": 450.0, "NVIDIA H200": 450.0}
NOW = dt.datetime(2027, 1, 1, tzinfo=dt.timezone.utc)


@dataclass
class World:
    con: duckdb.DuckDBPyConnection
    capped_lake: Path
    uncapped_lake: Path
    caps: dict[str, float]
    models: dict[str, str]
    days: list[dt.date]


def build_world(root: Path, *, gpus: int = 32, seed: int = 3, choose_caps=None) -> World:
    """`choose_caps(fleet, jobs of the day before the caps)` -> {gpu_uuid: W}; default: GPUs 0-3 of each host."""
    fleet = build_fleet(gpus, seed)
    caps = {g.uuid: CAP_W[g.model] for g in fleet if g.index < 4}
    if choose_caps is not None:
        simulate_fleet(root / "plan" / "lake", gpus=gpus, days=1, start=START + dt.timedelta(days=CAP_FROM - 1),
                       seed=seed, interval_s=60)
        jobs = duckdb.connect().execute("SELECT job_id, gpu_uuid, workload_class FROM read_parquet($p)",
                                        {"p": f"{root}/plan/lake/jobs/**/*.parquet"}).fetchall()
        caps = choose_caps(fleet, jobs)
    days = [START + dt.timedelta(days=d) for d in range(DAYS)]
    summary = simulate_fleet(root / "capped" / "lake", gpus=gpus, days=DAYS, start=START, seed=seed, interval_s=60,
                             power_limits_by_day={d: caps for d in days[CAP_FROM:]})
    simulate_fleet(root / "uncapped" / "lake", gpus=gpus, days=DAYS, start=START, seed=seed, interval_s=60)
    con = connect(root / "w.duckdb", root / "capped" / "lake")
    for d in days:
        build_day(con, d, WarehouseSettings(inventory_path=str(summary.inventory_path)), now=NOW)
        build_efficiency(con, d)
    return World(con, root / "capped" / "lake", root / "uncapped" / "lake", caps, {g.uuid: g.model for g in fleet}, days)


@cache
def true_job_energy(lake: Path) -> dict[tuple[str, str], tuple[float, float, dt.date]]:
    """{(job_id, gpu_uuid): (energy kWh from the simulated power, flops_total, UTC day it started)},
    straight from the simulator's rows (1-minute samples x 60 s)."""
    q = """
        WITH s AS (SELECT gpu_uuid, sampled_at, power_w FROM read_parquet($samples)),
             j AS (SELECT job_id, gpu_uuid, started_at, ended_at, flops_total, samples_total FROM read_parquet($jobs))
        SELECT j.job_id, j.gpu_uuid, sum(s.power_w) * 60 / 3.6e6, any_value(j.flops_total), any_value(CAST(j.started_at AS DATE))
        FROM j JOIN s ON s.gpu_uuid = j.gpu_uuid AND s.sampled_at >= j.started_at AND s.sampled_at < j.ended_at
        GROUP BY ALL"""
    rows = duckdb.connect().execute(q, {"samples": f"{lake}/gpu_samples/**/*.parquet",
                                        "jobs": f"{lake}/jobs/**/*.parquet"}).fetchall()
    return {(r[0], r[1]): (r[2], r[3], r[4]) for r in rows}
