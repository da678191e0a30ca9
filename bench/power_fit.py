"""Power fit of a fleet-day against a plain scan of the same rows.

A simulated fleet-day (32 GPUs x 1 day at 1 Hz; --quick: 8 GPUs at 10 s) is written to a temp
lake; `stg_gpu_samples` is a table of its rows (lake columns + day + interval_s, as the build
makes it). The fit (models.power.fit_day: stored hourly sums, sufficient statistics over the
exponent grid, held-out validation, job-energy error, residual table) is timed against one DuckDB
aggregate over every column the fit reads (bench.pipeline_steps.STG_SCAN_SQL). Target: the fit
within a small multiple of the scan.
"""

from __future__ import annotations

import datetime as dt

import duckdb

from bench.common import BenchContext, Figure, timed
from bench.pipeline_steps import STG_SCAN_SQL
from joulehouse.settings import ModelSettings
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.models.power import fit_day

DAY = dt.date(2026, 3, 2)


def run(ctx: BenchContext) -> list[Figure]:
    gpus, interval_s = (8, 10.0) if ctx.quick else (32, 1.0)
    lake = ctx.work_dir / "power_fit" / "lake"
    lake.mkdir(parents=True, exist_ok=True)
    summary = simulate_fleet(lake, gpus=gpus, days=1, start=DAY, seed=0, interval_s=interval_s)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE TABLE stg_gpu_samples AS SELECT * EXCLUDE (date), date AS day, "
                "epoch(lead(sampled_at) OVER (PARTITION BY host, gpu_uuid, source ORDER BY sampled_at)) "
                "- epoch(sampled_at) AS interval_s "
                "FROM read_parquet(?, hive_partitioning = true)", [f"{lake}/gpu_samples/**/*.parquet"])
    settings = ModelSettings()
    timed(lambda: con.execute(STG_SCAN_SQL, [DAY]).fetchall())  # warm up, as the fit's first query is
    scan_s, (row,) = timed(lambda: con.execute(STG_SCAN_SQL, [DAY]).fetchall())
    fit_s, fits = timed(lambda: fit_day(con, DAY, settings))
    rows = int(row[0])
    con.close()
    size = f"{gpus} GPUs x 1 day @ {interval_s:g} s = {rows:,} rows"
    print(f"power_fit: {size}; scan {scan_s:.3f} s, fit {fit_s:.3f} s; "
          + ", ".join(f"{f.gpu_model}: MAPE {f.mape_pct:.2f}%" for f in fits))
    assert rows == summary.rows["gpu_samples"], "the view must read every simulated row"
    return [
        Figure("power_fit", f"fit of a fleet-day ({size})", fit_s, "s", "plain scan of the fit's columns", scan_s,
               "a small multiple (<= ~20x) of the scan"),
        Figure("power_fit", "fit throughput", rows / fit_s, "rows/s"),
    ]
