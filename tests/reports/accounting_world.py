"""A small warehouse for the carbon and cost accounts: the relations the warehouse builds,
created by hand in an in-memory DuckDB (one site, one host, two GPUs, one day)."""

from __future__ import annotations

import datetime as dt

import duckdb

DAY = dt.date(2026, 3, 2)  # a Monday
UTC = dt.timezone.utc
GPUS = {"GPU-a100": "NVIDIA A100-SXM4-80GB", "GPU-h100": "NVIDIA H100 80GB HBM3"}


def at(hour: float, day: dt.date = DAY) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, tzinfo=UTC) + dt.timedelta(hours=hour)


def build_world(with_pue: bool = True, with_dim: bool = True, with_jobs: bool = True) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("""CREATE TABLE fct_gpu_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR,
        gpu_uuid VARCHAR, gpu_model VARCHAR, energy_kwh DOUBLE, avg_power_w DOUBLE, coverage_ratio DOUBLE,
        energy_source VARCHAR)""")
    rows = []
    for uuid, model in GPUS.items():
        for h in range(24):
            # Busy hours draw more: 0.35 kWh, idle 0.06 kWh (A100); H100 x1.6.
            kwh = (0.35 if 1 <= h < 6 else 0.06) * (1.6 if "H100" in model else 1.0)
            rows.append((at(h), DAY, "node-01", uuid, model, kwh, kwh * 1000, 1.0, "counter"))
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?,?,?,?,?,?,?,?,?)", rows)
    if with_pue:
        con.execute("CREATE TABLE fct_pue_hourly (hour_at TIMESTAMPTZ, site VARCHAR, pue DOUBLE, "
                    "it_energy_kwh DOUBLE, facility_energy_kwh DOUBLE, coverage_ratio DOUBLE)")
        # Hours 22 and 23 have no PUE: the default fills them (counted). No meter energy: the
        # demand charge takes the GPU-hours' IT x PUE.
        con.executemany("INSERT INTO fct_pue_hourly VALUES (?,?,?,?,?,?)",
                        [(at(h), "site-a", 1.2 + 0.01 * h, None, None, None) for h in range(22)])
    if with_dim:
        con.execute("""CREATE TABLE dim_gpu (gpu_uuid VARCHAR, host VARCHAR, gpu_index INTEGER, gpu_model VARCHAR,
            rack VARCHAR, site VARCHAR, region VARCHAR, purchased_on DATE, purchase_price_usd DOUBLE,
            embodied_kgco2e DOUBLE, lifetime_years DOUBLE)""")
        con.execute("INSERT INTO dim_gpu VALUES ('GPU-a100','node-01',0,'NVIDIA A100-SXM4-80GB','r1','site-a','FR',"
                    "'2024-01-01', 15000, 143, 4), ('GPU-h100','node-01',1,'NVIDIA H100 80GB HBM3','r1','site-a','FR',"
                    "'2025-01-01', NULL, NULL, NULL)")
    if with_jobs:
        con.execute("""CREATE TABLE raw_jobs (job_id VARCHAR, host VARCHAR, gpu_uuid VARCHAR, started_at TIMESTAMPTZ,
            ended_at TIMESTAMPTZ, "user" VARCHAR, team VARCHAR, stage VARCHAR, workload_class VARCHAR,
            "deferrable" BOOLEAN, requests_total BIGINT, tokens_total BIGINT, samples_total BIGINT, flops_total DOUBLE)""")
        jobs = [
            ("train-1", "GPU-a100", at(1.5), at(5), "ana", "vision", "training", 3.5 * 3.6e15 * 100),
            ("eval-1", "GPU-a100", at(4), at(6), "ben", "vision", "evaluation", None),  # overlaps train-1
            ("serve-1", "GPU-h100", at(-2), at(3), "cy", "search", "inference", None),  # from the day before
            ("prep-1", "GPU-h100", at(3), at(6), "cy", "search", "data-preparation", None),
            ("broken", "GPU-h100", at(8), at(7), "dan", "search", "training", None),  # ends before it starts
            ("other-day", "GPU-h100", at(30), at(31), "cy", "search", "training", None),
        ]
        con.executemany("INSERT INTO raw_jobs VALUES (?, 'node-01', ?, ?, ?, ?, ?, ?, 'throughput', false, NULL, NULL, NULL, ?)",
                        jobs)
    return con


def add_node_energy(con: duckdb.DuckDBPyConnection, overhead_kwh: float = 0.2) -> dict[int, str]:
    """fct_node_energy_hourly for node-01: its GPUs' energy + `overhead_kwh` (CPUs, fans, PSU) in
    hours 0-19 at full coverage; hour 20 half covered; hour 21 below its GPUs' energy; no row for
    hours 22-23. Returns the basis each hour should get."""
    con.execute("""CREATE TABLE fct_node_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, energy_kwh DOUBLE,
        avg_power_w DOUBLE, coverage_ratio DOUBLE, n_samples BIGINT)""")
    gpu = dict(con.execute("SELECT hour(hour_at), sum(energy_kwh) FROM fct_gpu_energy_hourly GROUP BY 1").fetchall())
    rows, expected = [], {}
    for h in range(22):
        kwh, coverage = gpu[h] + overhead_kwh, 1.0
        if h == 20:
            coverage = 0.5
        if h == 21:
            kwh = gpu[h] / 2
        rows.append((at(h), DAY, "node-01", kwh, kwh * 1000, coverage, 720))
        expected[h] = "node_ipmi" if h < 20 else "gpu_only"
    con.executemany("INSERT INTO fct_node_energy_hourly VALUES (?,?,?,?,?,?,?)", rows)
    expected.update({22: "gpu_only", 23: "gpu_only"})
    return expected
