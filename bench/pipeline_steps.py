"""The work bench/pipeline.py measures, each run in a fresh interpreter so that its peak memory
(the parent reads the child's max RSS from wait4) is its own:

  python -m bench.pipeline_steps floor LAKE DAY     one DuckDB aggregate over the day's files
  python -m bench.pipeline_steps persist LAKE DAY   the day's files copied into a DuckDB table
  python -m bench.pipeline_steps gx_import LAKE DAY import Great Expectations
  python -m bench.pipeline_steps pipeline LAKE DAY  joulehouse's daily steps, called directly, then
                                                    the ad hoc query and one publishing copy
  python -m bench.pipeline_steps gx_task DB DAY     Great Expectations' task on a built warehouse
  python -m bench.pipeline_steps pandas LAKE DAY    the same job as a team writes it in pandas
  python -m bench.pipeline_steps polars LAKE DAY    ... and in polars

Each prints one JSON line: wall seconds per step (imports not included, except those a step
does itself, as the DAG's tasks do: Great Expectations inside gx_task), and the process's peak
resident memory.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
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
# What an analyst asks of a day of readings (through `joulehouse sql`, read-only, in its sandbox).
ADHOC_SQL = (Path(__file__).with_name("adhoc_stg_day.sql")).read_text(encoding="utf-8")


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
    """What keeping the day's readings beside the warehouse costs at the least: one copy of the
    day's files written as the build writes stg_gpu_samples (Parquet, lz4, v2 encodings:
    warehouse/readings.py), min of `repeats`; and, for comparison, one CREATE TABLE AS of them
    into a DuckDB file, checkpointed (how stg_gpu_samples was kept before)."""
    import duckdb

    from joulehouse.warehouse.readings import PARQUET_OPTIONS

    ws = _settings(lake).warehouse
    files = f"{lake}/gpu_samples/date={day.isoformat()}/*/*.parquet"
    times: dict[str, list[float]] = {"persist_s": [], "persist_table_s": []}
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(prefix="jh-bench-persist-") as tmp:
            con = duckdb.connect(str(Path(tmp) / "p.duckdb"))
            con.execute("SET TimeZone = 'UTC'")
            con.execute("SET threads = ?", [ws.threads])
            con.execute("SET memory_limit = ?", [ws.memory_limit])
            t0 = time.perf_counter()
            con.execute(f"COPY (SELECT * FROM read_parquet(?)) TO '{tmp}/readings.parquet' ({PARQUET_OPTIONS})", [files])
            times["persist_s"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            con.execute("CREATE TABLE readings AS SELECT * FROM read_parquet(?)", [files])
            con.execute("CHECKPOINT")
            times["persist_table_s"].append(time.perf_counter() - t0)
            con.close()
    return {**{k: min(v) for k, v in times.items()}, "persist_all_s": times}


def gx_import(lake: Path, day: dt.date) -> dict:
    """Importing Great Expectations in a fresh interpreter, as the checks task does every day."""
    t0 = time.perf_counter()
    import great_expectations  # noqa: F401

    return {"gx_import_s": time.perf_counter() - t0}


def pipeline(lake: Path, day: dt.date) -> dict:
    """build_day, run_gate, fit_day, carbon_day, tco_day, recommend_day on a fresh warehouse: the
    daily run's critical path. Then, outside its total: Great Expectations' task (its own
    interpreter, as its own DAG task), the ad hoc query, and one copy of the file as each writing
    step makes to publish it (warehouse.publish)."""
    from joulehouse.models.power import fit_day
    from joulehouse.models.recommend import recommend_day
    from joulehouse.reports.accounts.carbon import carbon_day
    from joulehouse.reports.accounts.tco import tco_day
    from joulehouse.warehouse.build import build_day
    from joulehouse.warehouse.db import connect
    from joulehouse.warehouse.gate import run_gate

    settings = _settings(lake)
    ws = settings.warehouse
    data_dir = SHARED_DATA if SHARED_DATA.is_dir() else None
    now = dt.datetime.combine(day + dt.timedelta(days=2), dt.time(), dt.timezone.utc)
    seconds: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="jh-bench-wh-") as tmp:
        db = Path(tmp) / "w.duckdb"
        started = time.perf_counter()

        def step(name, fn):
            t0 = time.perf_counter()
            result = fn()
            seconds[name] = time.perf_counter() - t0
            return result

        con = step("connect", lambda: connect(db, lake, threads=ws.threads, memory_limit=ws.memory_limit))
        build = step("build_day", lambda: build_day(con, day, ws, now=now))
        step("run_gate", lambda: run_gate(con, day, ws))
        fits = step("fit_day", lambda: fit_day(con, day, settings.models))
        step("carbon_day", lambda: carbon_day(con, day, settings.carbon, data_dir))
        step("tco_day", lambda: tco_day(con, day, settings.tco, data_dir,
                                        max_meter_gap_s=settings.warehouse.max_meter_gap_s))
        step("recommend_day", lambda: recommend_day(
            con, day, settings.recommend, carbon_price_usd_per_tco2e=settings.carbon.carbon_price_usd_per_tco2e))
        total = time.perf_counter() - started
        # the daily run's peak, before the bench's own extras below (the ad hoc query's comparison
        # copies the readings into a table, which the daily run never does)
        critical_path_mib = peak_rss_mib()
        scans = []
        for _ in range(3):  # the fit's own baseline: one plain scan of the rows it reads
            t0 = time.perf_counter()
            con.execute(STG_SCAN_SQL, [day]).fetchall()
            scans.append(time.perf_counter() - t0)
        con.close()
        gx = _child("gx_task", db, day)
        adhoc = adhoc_query(db, day)
        adhoc_table = adhoc_over_table(db, day)
        copy_s = publish_copy(db)
        warehouse_mb = db.stat().st_size / 1e6
    return {"total_s": total, "critical_path_peak_mib": critical_path_mib, "seconds": seconds,
            "build_seconds": build.seconds, "stg_scan_s": min(scans),
            "samples": build.raw_gpu_rows, "mape_pct": {f.gpu_model: f.mape_pct for f in fits},
            "gx_task_s": gx["gx_task_s"], "gx_task_mib": gx["peak_rss_mib"], "adhoc_s": adhoc["adhoc_s"],
            "adhoc_table_s": adhoc_table,
            "adhoc_rows": adhoc["rows"], "publish_copy_s": copy_s, "warehouse_mb": warehouse_mb}


def _child(mode: str, path: Path, day: dt.date) -> dict:
    proc = subprocess.run([sys.executable, "-m", "bench.pipeline_steps", mode, str(path), day.isoformat()],
                          cwd=REPO, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"bench.pipeline_steps {mode} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def gx_task(db: Path, day: dt.date) -> dict:
    """What the DAG's validate_data does: import GX, validate the day's warnings over its summaries
    read from the warehouse, store the rows (here in place: the file is the bench's own)."""
    from joulehouse.settings import WarehouseSettings
    from joulehouse.warehouse.db import connect

    t0 = time.perf_counter()
    from joulehouse.warehouse.checks import run_checks

    con = connect(db, None)
    try:
        summary = run_checks(con, day, WarehouseSettings())
    finally:
        con.close()
    return {"gx_task_s": time.perf_counter() - t0, "warnings": len(summary.results)}


def adhoc_query(db: Path, day: dt.date, repeats: int = 3) -> dict:
    """The ad hoc query over the day's stg_gpu_samples through the read-only sandbox (min of
    `repeats`, each on a new connection, every row fetched)."""
    from joulehouse.warehouse.sqlrun import open_read_only, run_query

    times, rows = [], 0
    for _ in range(repeats):
        t0 = time.perf_counter()
        con = open_read_only(db)
        try:
            rows = sum(len(batch) for batch in run_query(con, ADHOC_SQL, {"day": day.isoformat()}).batches)
        finally:
            con.close()
        times.append(time.perf_counter() - t0)
    return {"adhoc_s": min(times), "adhoc_all_s": times, "rows": rows}


def adhoc_over_table(db: Path, day: dt.date, repeats: int = 3) -> float:
    """The same ad hoc query over the day's readings kept as a table inside a DuckDB file (how
    stg_gpu_samples was stored before warehouse/readings.py), min of `repeats`, each on a new
    read-only connection: the 'before' of the readings-as-files change, measured in the same run."""
    import duckdb

    table_db = db.with_name("readings-as-table.duckdb")
    con = duckdb.connect(str(db), read_only=True)
    files = [p for (p,) in con.execute("SELECT path FROM stg_gpu_samples_files").fetchall()]
    con.close()
    con = duckdb.connect(str(table_db))
    con.execute("CREATE TABLE stg_gpu_samples AS SELECT * FROM read_parquet(?)", [files])
    con.close()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        con = duckdb.connect(str(table_db), read_only=True)
        con.execute("SET TimeZone = 'UTC'")
        con.execute(ADHOC_SQL, {"day": day}).fetchall()
        con.close()
        times.append(time.perf_counter() - t0)
    table_db.unlink()
    return min(times)


def publish_copy(db: Path) -> float:
    """One copy of the warehouse file, fsynced: what each writing step of the DAG adds to publish
    its work by rename (warehouse.publish)."""
    copy = db.with_name("published-copy.duckdb")
    t0 = time.perf_counter()
    shutil.copyfile(db, copy)
    with open(copy, "rb") as written:
        os.fsync(written.fileno())
    seconds = time.perf_counter() - t0
    copy.unlink()
    return seconds


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
        fits[model] = _lstsq_best_alpha(
            ms, g["temp_c"].to_numpy(dtype=float), g["sm_active_ratio"].to_numpy(dtype=float),
            (g["sm_clock_mhz"] / g["sm_clock_mhz"].max()).to_numpy(), g["dram_active_ratio"].to_numpy(dtype=float),
            ((g["pcie_tx_bytes_per_s"] + g["pcie_rx_bytes_per_s"].fillna(0)) / 1e9).to_numpy(dtype=float),
            g["power_w"].to_numpy(dtype=float))
    total = time.perf_counter() - t0
    return {"total_s": total, "energy_s": t_energy, "fit_s": total - t_energy, "samples": len(df),
            "gpu_hours": len(hourly), "alpha": fits}


def _lstsq_best_alpha(ms, temp_c, act, clock, dram, pcie, y) -> float:
    """The alpha of the grid whose least-squares fit of P = b0 + b1 (T-25) + b2 act (f/fmax)^alpha
    + b3 dram + b4 pcie leaves the smallest SSE (numpy; the same for the pandas and polars ways)."""
    import numpy as np

    best = None
    for i in range(ms.alpha_count):
        alpha = ms.alpha_min + ms.alpha_step * i
        x = np.column_stack([np.ones(len(y)), temp_c - 25.0, act * clock ** alpha, dram, pcie])
        coef, sse, *_ = np.linalg.lstsq(x, y, rcond=None)
        sse_value = float(sse[0]) if len(sse) else float(np.sum((x @ coef - y) ** 2))
        if best is None or sse_value < best[0]:
            best = (sse_value, alpha)
    return best[1]


def polars_way(lake: Path, day: dt.date, max_gap_s: float = 10.0) -> dict:
    """pandas_way's job, written in polars by a team that knows it: the same read, sort, trapezoid
    per GPU and hour (gaps over `max_gap_s` not bridged) and numpy fit per GPU model."""
    import polars as pl

    from joulehouse.settings import ModelSettings

    ms = ModelSettings()
    t0 = time.perf_counter()
    columns = ["gpu_uuid", "gpu_model", "sampled_at", "power_w", "temp_c", "sm_active_ratio",
               "dram_active_ratio", "sm_clock_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"]
    df = (pl.scan_parquet(lake / "gpu_samples" / f"date={day.isoformat()}" / "*" / "*.parquet", hive_partitioning=False)
          .select(columns).sort(["gpu_uuid", "sampled_at"]).collect())
    dt_s = (pl.col("sampled_at").diff().dt.total_microseconds() / 1e6).over("gpu_uuid")
    energy = pl.when(dt_s <= max_gap_s).then((pl.col("power_w").shift().over("gpu_uuid") + pl.col("power_w")) / 2 * dt_s)
    hourly = (df.with_columns(energy.fill_null(0.0).alias("energy_j"), pl.col("sampled_at").dt.truncate("1h").alias("hour_at"))
              .group_by(["gpu_uuid", "hour_at"]).agg(pl.col("energy_j").sum(), pl.len().alias("n"))
              .with_columns((pl.col("energy_j") / 3.6e6).alias("energy_kwh")))
    t_energy = time.perf_counter() - t0
    fits = {}
    needed = ["power_w", "temp_c", "sm_active_ratio", "dram_active_ratio"]
    for (model,), g in df.drop_nulls([*needed, "sm_clock_mhz"]).drop_nans(needed).group_by(["gpu_model"]):
        fits[model] = _lstsq_best_alpha(
            ms, g["temp_c"].to_numpy().astype(float), g["sm_active_ratio"].to_numpy().astype(float),
            (g["sm_clock_mhz"] / g["sm_clock_mhz"].max()).to_numpy(),
            g["dram_active_ratio"].to_numpy().astype(float),
            ((g["pcie_tx_bytes_per_s"] + g["pcie_rx_bytes_per_s"].fill_null(0)) / 1e9).to_numpy().astype(float),
            g["power_w"].to_numpy().astype(float))
    total = time.perf_counter() - t0
    return {"total_s": total, "energy_s": t_energy, "fit_s": total - t_energy, "samples": df.height,
            "gpu_hours": hourly.height, "alpha": fits}


def peak_rss_mib() -> float:
    """This process's peak resident memory (MiB): VmHWM, counted from exec, so not the parent's."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    mode, lake, day = sys.argv[1], Path(sys.argv[2]), dt.date.fromisoformat(sys.argv[3])
    work = {"floor": floor, "persist": persist, "gx_import": gx_import, "pipeline": pipeline, "gx_task": gx_task,
            "pandas": pandas_way, "polars": polars_way}[mode]
    print(json.dumps({**work(lake, day), "peak_rss_mib": peak_rss_mib()}, default=str))


if __name__ == "__main__":
    main()
