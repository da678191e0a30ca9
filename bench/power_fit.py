"""Power fit of a fleet-day against a plain scan of the same rows.

A simulated fleet-day (32 GPUs x 1 day at 1 Hz; --quick: 8 GPUs at 10 s) is written to a temp
lake; `stg_gpu_samples` is a view over its Parquet files (lake columns + day). The fit
(models.power.fit_day: feature table, sufficient statistics over the exponent grid, held-out
validation, residual table) is timed against one DuckDB scan of the same relation
(`SELECT count(*), sum(power_w), ...`). Target: the fit within a small multiple of the scan.
"""

from __future__ import annotations

import datetime as dt

import duckdb

from bench.common import BenchContext, Figure, timed
from collectors.settings import ModelSettings
from collectors.sim import simulate_fleet
from models.power import fit_day

DAY = dt.date(2026, 3, 2)
SCAN_SQL = ("SELECT count(*), sum(power_w), avg(temp_c), avg(sm_active_ratio), avg(dram_active_ratio), "
            "max(sm_clock_mhz) FROM stg_gpu_samples")


def run(ctx: BenchContext) -> list[Figure]:
    gpus, interval_s = (8, 10.0) if ctx.quick else (32, 1.0)
    lake = ctx.work_dir / "power_fit" / "lake"
    lake.mkdir(parents=True, exist_ok=True)
    summary = simulate_fleet(lake, gpus=gpus, days=1, start=DAY, seed=0, interval_s=interval_s)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("CREATE VIEW stg_gpu_samples AS SELECT * EXCLUDE (date), date AS day "
                f"FROM read_parquet('{lake}/gpu_samples/**/*.parquet', hive_partitioning = true)")
    settings = ModelSettings()
    timed(lambda: con.execute(SCAN_SQL).fetchall())  # warm the file cache for both
    scan_s, (row,) = timed(lambda: con.execute(SCAN_SQL).fetchall())
    fit_s, fits = timed(lambda: fit_day(con, DAY, settings))
    rows = int(row[0])
    con.close()
    size = f"{gpus} GPUs x 1 day @ {interval_s:g} s = {rows:,} rows"
    print(f"power_fit: {size}; scan {scan_s:.3f} s, fit {fit_s:.3f} s; "
          + ", ".join(f"{f.gpu_model}: MAPE {f.mape_pct:.2f}%" for f in fits))
    assert rows == summary.rows["gpu_samples"], "the view must read every simulated row"
    return [
        Figure("power_fit", f"fit of a fleet-day ({size})", fit_s, "s", "plain scan of the same rows", scan_s,
               "a small multiple (<= ~20x) of the scan"),
        Figure("power_fit", "fit throughput", rows / fit_s, "rows/s"),
    ]
