"""A hand-written warehouse of 40 days over two months for the dashboard's tests: two teams, two
GPU models on two sites, one job a day per team, costs, FLOPs per watt and one measured outcome."""

from __future__ import annotations

import datetime as dt

import duckdb

START = dt.date(2026, 5, 20)
DAYS = 40
A100, H100, RTX = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA GeForce RTX 4090"


def build(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE TABLE rpt_carbon_daily (day DATE, job_id VARCHAR, team VARCHAR, location_gco2e DOUBLE, "
                "market_gco2e DOUBLE, embodied_gco2e DOUBLE, energy_kwh DOUBLE)")
    con.execute("CREATE TABLE rpt_tco_daily (day DATE, job_id VARCHAR, total_cost_usd DOUBLE)")
    con.execute("CREATE TABLE fct_job_efficiency (day DATE, job_id VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR, "
                "energy_kwh DOUBLE, tokens_total BIGINT, requests_total BIGINT, samples_total BIGINT)")
    con.execute("CREATE TABLE fct_gpu_energy_hourly (day DATE, gpu_uuid VARCHAR, gpu_model VARCHAR, energy_kwh DOUBLE)")
    con.execute("CREATE TABLE dim_gpu (gpu_uuid VARCHAR, site VARCHAR)")
    con.executemany("INSERT INTO dim_gpu VALUES (?, ?)", [("GPU-a", "site-a"), ("GPU-h", "site-b")])
    con.execute("CREATE TABLE fct_flops_per_watt_daily (day DATE, gpu_model VARCHAR, fp16_equivalent_flops_per_w DOUBLE, "
                "goal_flops_per_w DOUBLE)")
    con.execute("CREATE TABLE fct_recommendation_outcome (day DATE, scope VARCHAR, gpu_model VARCHAR, "
                "power_limit_w_before DOUBLE, power_limit_w_after DOUBLE, realised_saving_pct DOUBLE, "
                "saving_ci_low_pct DOUBLE, saving_ci_high_pct DOUBLE, predicted_saving_pct DOUBLE, n_treated_gpus BIGINT)")
    for k in range(DAYS):
        day = START + dt.timedelta(days=k)
        # nlp's job runs on the A100 only; vision's 1 kWh on the A100 and 3 kWh on the H100
        con.executemany("INSERT INTO rpt_carbon_daily VALUES (?, ?, ?, ?, ?, ?, ?)", [
            (day, f"nlp-{k}", "nlp", 1000.0, 400.0, 100.0, 4.0), (day, f"vision-{k}", "vision", 2000.0, 800.0, 200.0, 4.0),
            (day, "unallocated", "unallocated", 300.0, 120.0, 30.0, 1.0)])
        con.executemany("INSERT INTO rpt_tco_daily VALUES (?, ?, ?)", [
            (day, f"nlp-{k}", 10.0), (day, f"vision-{k}", 20.0), (day, "unallocated", 3.0)])
        con.executemany("INSERT INTO fct_job_efficiency VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [
            (day, f"nlp-{k}", "GPU-a", A100, 4.0, None, None, 1000 + 10 * k),
            (day, f"vision-{k}", "GPU-a", A100, 1.0, 360_000, 900, None),
            (day, f"vision-{k}", "GPU-h", H100, 3.0, 2_000_000, 5000, None)])
        # GPU board energy: what the jobs held plus idle time, 0.6 kWh on the A100, 0.2 on the H100
        # and 0.2 on a GPU outside the inventory (a real trace's), which no job ran on
        con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?, ?, ?, ?)", [
            (day, "GPU-a", A100, 5.6), (day, "GPU-h", H100, 3.2), (day, "GPU-r", RTX, 0.2)])
        con.executemany("INSERT INTO fct_flops_per_watt_daily VALUES (?, ?, ?, ?)", [
            (day, "fleet", 4e11 * (1 + 0.005 * k), 4.8e11)])
    con.execute("INSERT INTO fct_recommendation_outcome VALUES (?, 'model_setting', ?, 400, 325, 7.5, 4.0, 11.0, 9.0, 3)",
                [START + dt.timedelta(days=20), A100])
