"""Cost per TFLOPS-hour per GPU model, on hand-written accounts: a job's cost follows its energy
onto the GPU models it ran on, and a TFLOPS-hour is 3.6e15 FP16-equivalent FLOP."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.reports.accounts.compute_cost import compute_cost_day

DAY = dt.date(2026, 3, 1)
A100, H100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"


def world() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("CREATE TABLE rpt_tco_daily (day DATE, job_id VARCHAR, energy_cost_usd DOUBLE, total_cost_usd DOUBLE)")
    con.executemany("INSERT INTO rpt_tco_daily VALUES (?, ?, ?, ?)", [
        (DAY, "a", 3.0, 30.0), (DAY, "b", 4.0, 40.0), (DAY, "idle", 1.0, 10.0)])
    con.execute("CREATE TABLE fct_job_efficiency (day DATE, job_id VARCHAR, gpu_model VARCHAR, energy_kwh DOUBLE, "
                "flops_total DOUBLE)")
    # job a: all on A100s; job b: 1 kWh on an A100, 3 kWh on an H100; 'idle' reports no FLOPs
    con.executemany("INSERT INTO fct_job_efficiency VALUES (?, ?, ?, ?, ?)", [
        (DAY, "a", A100, 2.0, 1e18), (DAY, "a", A100, 2.0, 1e18), (DAY, "b", A100, 1.0, 1e17),
        (DAY, "b", H100, 3.0, 9e17), (DAY, "idle", A100, 1.0, None)])
    con.execute("CREATE TABLE fct_flops_per_watt_daily (day DATE, gpu_model VARCHAR, fp16_equivalent_flops_total DOUBLE)")
    con.executemany("INSERT INTO fct_flops_per_watt_daily VALUES (?, ?, ?)", [
        (DAY, A100, 7.2e18), (DAY, H100, 3.6e18), (DAY, "fleet", 10.8e18)])
    return con


def test_cost_follows_energy_onto_each_model_and_divides_by_tflops_hours():
    con = world()
    assert compute_cost_day(con, DAY) == 3
    rows = {r[0]: r[1:] for r in con.execute(
        "SELECT gpu_model, fp16_equivalent_tflops_hours, energy_cost_usd, total_cost_usd, "
        "energy_cost_per_tflops_hour_usd, total_cost_per_tflops_hour_usd FROM rpt_compute_cost_daily").fetchall()}
    assert rows[A100][:3] == pytest.approx((2000.0, 3.0 + 1.0, 30.0 + 10.0))  # b's 1 of 4 kWh
    assert rows[H100][:3] == pytest.approx((1000.0, 3.0, 30.0))
    assert rows["fleet"][3:] == pytest.approx((7.0 / 3000.0, 70.0 / 3000.0)), "the idle line reports no FLOPs"
    assert compute_cost_day(con, DAY) == 3, "a re-run replaces the day"


def test_without_cost_accounts_there_is_nothing_to_divide():
    con = world()
    con.execute("DROP TABLE rpt_tco_daily")
    assert compute_cost_day(con, DAY) is None
