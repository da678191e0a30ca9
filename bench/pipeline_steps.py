"""The work bench/pipeline.py measures, each run in a fresh interpreter so that its peak memory
(the parent reads the child's max RSS from wait4) is its own:

  python -m bench.pipeline_steps floor LAKE DAY     one DuckDB aggregate over the day's files
  python -m bench.pipeline_steps persist LAKE DAY   the day's files copied into a DuckDB table
  python -m bench.pipeline_steps gx_import LAKE DAY import Great Expectations
  python -m bench.pipeline_steps pipeline LAKE DAY  joulehouse's daily steps, called directly
  python -m bench.pipeline_steps pandas LAKE DAY    the same job as a team writes it in pandas

Each prints one JSON line: wall seconds per step (imports not included, except those a step
does itself, as the DAG's tasks do: Great Expectations inside run_checks), and the process's
peak resident memory.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
# Same engine settings on every side: the warehouse's defaults (joulehouse.warehouse.settings).
FLOOR_SQL = """
SELECT gpu_uuid, date_trunc('hour', sampled_at) AS hour_at, sum(power_w) AS power_sum_w, count(*) AS n
FROM read_parquet(? || '/gpu_samples/date=' || ? || '/*/*.parquet')
GROUP BY ALL
"""
# The fit's baseline: one plain aggregate over every column the fit reads (models/sql/power_features.sql).
STG_SCAN_SQL = ("SELECT count(*), max(gpu_model), max(host), max(gpu_uuid), max(source), max(sampled_at), "
                "sum(interval_s), sum(power_w), max(power_limit_w), avg(temp_c), avg(sm_active_ratio), "
                "avg(util_gpu_pct), max(sm_clock_mhz), avg(dram_active_ratio), avg(util_mem_pct), "
                "sum(pcie_tx_bytes_per_s), sum(pcie_rx_bytes_per_s), bit_or(clock_event_reasons) "
                "FROM stg_gpu_samples WHERE day = ?")


def _settings(lake: Path):
    from joulehouse.settings import (CarbonSettings, LakeSettings, ModelSettings, Settings, TcoSettings,
                                     WarehouseSettings)

    grid = SHARED_DATA / "grid" / "electricitymaps_FR_2022_hourly.csv"
    prices = SHARED_DATA / "prices" / "pjm_rto_da_hourly_lmp_2025.csv"
    return Settings(
        lake=LakeSettings(path=str(lake)),
        warehouse=WarehouseSettings(inventory_path=str(lake.parent / "inventory.csv")),
        carbon=CarbonSettings(grid_file=str(grid) if grid.exists() else ""),
        tco=TcoSettings(price_file=str(prices) if prices.exists() else ""),
        models=ModelSettings(),
    )


def floor(lake: Path, day: dt.date, repeats: int = 3) -> dict:
    """The floor: hourly sum of power per GPU over the day's files (min of `repeats`)."""
    import duckdb

    ws = _settings(lake).warehouse
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET threads = ?", [ws.threads])
    con.execute("SET memory_limit = ?", [ws.memory_limit])
    times, rows = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        rows = len(con.execute(FLOOR_SQL, [str(lake), day.isoformat()]).fetchall())
        times.append(time.perf_counter() - t0)
    n = con.execute("SELECT count(*) FROM read_parquet(? || '/gpu_samples/date=' || ? || '/*/*.parquet')",
                    [str(lake), day.isoformat()]).fetchone()[0]
    return {"floor_s": min(times), "floor_all_s": times, "gpu_hours": rows, "samples": n}


def persist(lake: Path, day: dt.date, repeats: int = 2) -> dict:
    """What keeping the day's readings in the warehouse costs at the least: one CREATE TABLE AS of
    the day's files into a fresh DuckDB file (stg_gpu_samples is such a table), min of `repeats`."""
    import duckdb

    ws = _settings(lake).warehouse
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="jh-bench-persist-") as tmp:
            con = duckdb.connect(str(Path(tmp) / "p.duckdb"))
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET threads = ?", [ws.threads])
            con.execute("SET memory_limit = ?", [ws.memory_limit])
            t0 = time.perf_counter()
            con.execute("CREATE TABLE readings AS SELECT * FROM read_parquet(? || '/gpu_samples/date=' || ? || "
                        "'/*/*.parquet')", [str(lake), day.isoformat()])
            con.execute("CHECKPOINT")
            times.append(time.perf_counter() - t0)
            con.close()
    return {"persist_s": min(times), "persist_all_s": times}


def gx_import(lake: Path, day: dt.date) -> dict:
    """Importing Great Expectations in a fresh interpreter, as the checks task does every day."""
    t0 = time.perf_counter()
    import great_expectations  # noqa: F401

    return {"gx_import_s": time.perf_counter() - t0}


def pipeline(lake: Path, day: dt.date) -> dict:
    """build_day, run_checks, fit_day, carbon_day, tco_day, recommend_day on a fresh warehouse."""
    from joulehouse.models.power import fit_day
    from joulehouse.models.recommend import recommend_day
    from joulehouse.reports.accounts.carbon import carbon_day
    from joulehouse.reports.accounts.tco import tco_day
    from joulehouse.warehouse.build import build_day
    from joulehouse.warehouse.checks import run_checks
    from joulehouse.warehouse.db import connect

    settings = _settings(lake)
    ws = settings.warehouse
    data_dir = SHARED_DATA if SHARED_DATA.is_dir() else None
    now = dt.datetime.combine(day + dt.timedelta(days=2), dt.time(), dt.timezone.utc)
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="jh-bench-wh-") as tmp:
        started = time.perf_counter()

        def step(name, fn):
            t0 = time.perf_counter()
            result = fn()
            seconds[name] = time.perf_counter() - t0
            return result

        con = step("connect", lambda: connect(Path(tmp) / "w.duckdb", lake, threads=ws.threads,
                                              memory_limit=ws.memory_limit))
        build = step("build_day", lambda: build_day(con, day, ws, now=now))
        step("run_checks", lambda: run_checks(con, day, ws))
        fits = step("fit_day", lambda: fit_day(con, day, settings.models))
        step("carbon_day", lambda: carbon_day(con, day, settings.carbon, data_dir))
        step("tco_day", lambda: tco_day(con, day, settings.tco, data_dir))
        step("recommend_day", lambda: recommend_day(
            con, day, settings.recommend, carbon_price_usd_per_tco2e=settings.carbon.carbon_price_usd_per_tco2e))
        total = time.perf_counter() - started
        scans = []
        for _ in range(3):  # the fit's own baseline: one plain scan of the rows it reads
            t0 = time.perf_counter()
            con.execute(STG_SCAN_SQL, [day]).fetchall()
            scans.append(time.perf_counter() - t0)
        con.close()
    return {"total_s": total, "seconds": seconds, "build_seconds": build.seconds, "stg_scan_s": min(scans),
            "samples": build.raw_gpu_rows, "mape_pct": {f.gpu_model: f.mape_pct for f in fits}}


def pandas_way(lake: Path, day: dt.date, max_gap_s: float = 10.0) -> dict:
    """Without joulehouse: read the day, per GPU and hour integrate power (trapezoid, gaps over
    `max_gap_s` not bridged), and fit P = b0 + b1 (T-25) + b2 act (f/fmax)^alpha + b3 dram + b4 pcie
    per GPU model with numpy least squares over the same alpha grid the models use."""
    import numpy as np
    import pandas as pd

    from joulehouse.settings import ModelSettings

    ms = ModelSettings()
    t0 = time.perf_counter()
    columns = ["gpu_uuid", "gpu_model", "sampled_at", "power_w", "temp_c", "sm_active_ratio",
               "dram_active_ratio", "sm_clock_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"]
    # The files carry host themselves: the host= folder is not read as a column.
    df = pd.read_parquet(lake / "gpu_samples" / f"date={day.isoformat()}", columns=columns, partitioning=None)
    df = df.sort_values(["gpu_uuid", "sampled_at"], ignore_index=True)
    t_s = (df["sampled_at"] - pd.Timestamp("1970-01-01", tz="UTC")).dt.total_seconds()
    by_gpu = df.groupby("gpu_uuid", sort=False)
    dt_s = t_s.groupby(df["gpu_uuid"]).diff()
    p0 = by_gpu["power_w"].shift()
    df["energy_j"] = np.where(dt_s <= max_gap_s, (p0 + df["power_w"]) / 2 * dt_s, 0.0)
    df["hour_at"] = df["sampled_at"].dt.floor("h")
    hourly = df.groupby(["gpu_uuid", "hour_at"]).agg(energy_j=("energy_j", "sum"), n=("power_w", "size"))
    hourly["energy_kwh"] = hourly["energy_j"] / 3.6e6
    t_energy = time.perf_counter() - t0
    fits = {}
    for model, g in df.groupby("gpu_model"):
        g = g.dropna(subset=["power_w", "temp_c", "sm_active_ratio", "dram_active_ratio", "sm_clock_mhz"])
        clock = (g["sm_clock_mhz"] / g["sm_clock_mhz"].max()).to_numpy()
        act = g["sm_active_ratio"].to_numpy(dtype=float)
        pcie = ((g["pcie_tx_bytes_per_s"] + g["pcie_rx_bytes_per_s"].fillna(0)) / 1e9).to_numpy(dtype=float)
        y = g["power_w"].to_numpy(dtype=float)
        best = None
        for i in range(ms.alpha_count):
            alpha = ms.alpha_min + ms.alpha_step * i
            x = np.column_stack([np.ones(len(g)), g["temp_c"].to_numpy(dtype=float) - 25.0, act * clock ** alpha,
                                 g["dram_active_ratio"].to_numpy(dtype=float), pcie])
            coef, sse, *_ = np.linalg.lstsq(x, y, rcond=None)
            sse_value = float(sse[0]) if len(sse) else float(np.sum((x @ coef - y) ** 2))
            if best is None or sse_value < best[0]:
                best = (sse_value, alpha, coef)
        fits[model] = best[1]
    total = time.perf_counter() - t0
    return {"total_s": total, "energy_s": t_energy, "fit_s": total - t_energy, "samples": len(df),
            "gpu_hours": len(hourly), "alpha": fits}


def peak_rss_mib() -> float:
    """This process's peak resident memory (MiB): VmHWM, counted from exec, so not the parent's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    mode, lake, day = sys.argv[1], Path(sys.argv[2]), dt.date.fromisoformat(sys.argv[3])
    work = {"floor": floor, "persist": persist, "gx_import": gx_import, "pipeline": pipeline,
            "pandas": pandas_way}[mode]
    print(json.dumps({**work(lake, day), "peak_rss_mib": peak_rss_mib()}, default=str))


if __name__ == "__main__":
    main()
