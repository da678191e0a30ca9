"""A small warehouse day with every relation the report reads (built in memory for tests)."""

from __future__ import annotations

import datetime as dt
import math

import duckdb

DAY = dt.date(2026, 1, 2)
MODELS = {"NVIDIA A100-SXM4-80GB": (400.0, 52.0), "NVIDIA H100 80GB HBM3": (700.0, 90.0), "NVIDIA H200": (700.0, 75.0)}


def gpus():
    out = []
    for h in range(3):
        model = list(MODELS)[h]
        for i in range(4):
            out.append((f"node-0{h + 1}", f"GPU-{h}{i}aa0000-0000-4000-8000-00000000000{i}", model))
    return out


def build_day(con: duckdb.DuckDBPyConnection, day: dt.date = DAY) -> None:
    """Create and fill the report's relations for `day` (values follow a daily load curve)."""
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
    con.execute("""CREATE TABLE fct_gpu_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, gpu_uuid VARCHAR,
        gpu_model VARCHAR, energy_kwh DOUBLE, avg_power_w DOUBLE, coverage_ratio DOUBLE, energy_source VARCHAR)""")
    con.execute("""CREATE TABLE fct_power_residual_hourly (day DATE, hour_at TIMESTAMPTZ, host VARCHAR, gpu_uuid VARCHAR,
        gpu_model VARCHAR, feature_set VARCHAR, n_samples BIGINT, measured_energy_kwh DOUBLE, predicted_energy_kwh DOUBLE,
        residual_energy_kwh DOUBLE, residual_pct DOUBLE, avg_temp_c DOUBLE, power_limited_ratio DOUBLE)""")
    energy, residual = [], []
    for k, (host, uuid, model) in enumerate(gpus()):
        limit_w, idle_w = MODELS[model]
        for h in range(24):
            load = 0.5 + 0.45 * math.sin((h - 6 + k) / 24 * 2 * math.pi)
            power = idle_w + load * (limit_w * 0.8 - idle_w)
            hour = start + dt.timedelta(hours=h)
            energy.append((hour, day, host, uuid, model, power / 1000, power, 0.97 if h else 0.8, "counter"))
            predicted = power * (1 + 0.03 * math.sin(h * 1.7 + k)) / 1000
            temp = 35 + power / limit_w * 40
            residual.append((day, hour, host, uuid, model, "full", 3600, power / 1000, predicted,
                             power / 1000 - predicted, 100 * (power / 1000 - predicted) / (power / 1000), temp, 0.0))
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?,?,?,?,?,?,?,?,?)", energy)
    con.executemany("INSERT INTO fct_power_residual_hourly VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", residual)
    con.execute("""CREATE TABLE fct_power_model (gpu_model VARCHAR, fitted_at TIMESTAMPTZ, day DATE, feature_set VARCHAR,
        n_samples BIGINT, mape_pct DOUBLE, r2 DOUBLE, passed_gate BOOLEAN, gate_reason VARCHAR, static_w DOUBLE)""")
    con.executemany("INSERT INTO fct_power_model VALUES (?,?,?,?,?,?,?,?,?,?)", [
        ("NVIDIA A100-SXM4-80GB", start, day, "full", 345600, 2.1, 0.991, True, None, 48.0),
        ("NVIDIA H100 80GB HBM3", start, day, "full", 345600, 13.4, 0.81, False, "held-out MAPE 13.4% > 10%", 85.0),
        ("NVIDIA H200", start, day, "full", 345600, 3.0, 0.985, True, None, 70.0),
    ])
    con.execute("CREATE TABLE fct_thermal_gpu (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR, theta_c_per_w DOUBLE)")
    con.executemany("INSERT INTO fct_thermal_gpu VALUES (?,?,?,?,?)",
                    [(day, h, u, m, 0.05 + 0.01 * (k % 5)) for k, (h, u, m) in enumerate(gpus())])
    cols = "day DATE, team VARCHAR, \"user\" VARCHAR, job_id VARCHAR, stage VARCHAR, gpu_hours DOUBLE, energy_kwh DOUBLE"
    con.execute(f"CREATE TABLE rpt_carbon_daily ({cols}, total_gco2e DOUBLE)")
    con.execute(f"CREATE TABLE rpt_tco_daily ({cols}, total_cost_usd DOUBLE)")
    teams = [("vision", "training"), ("vision", "evaluation"), ("search", "inference"), ("search", "data-preparation"),
             ("unallocated", "idle")]
    for n, (team, stage) in enumerate(teams):
        con.execute("INSERT INTO rpt_carbon_daily VALUES (?,?,?,?,?,?,?,?)", [day, team, "u", f"j{n}", stage, 20.0, 10.0 + n, 900.0 * (n + 1)])
        con.execute("INSERT INTO rpt_tco_daily VALUES (?,?,?,?,?,?,?,?)", [day, team, "u", f"j{n}", stage, 20.0, 10.0 + n, 55.0 * (n + 1)])
    con.execute("""CREATE TABLE fct_check_results (day DATE, suite VARCHAR, expectation VARCHAR, severity VARCHAR,
        success BOOLEAN, observed_value VARCHAR)""")
    con.executemany("INSERT INTO fct_check_results VALUES (?,?,?,?,?,?)", [
        (day, "stg_gpu_samples", "expect_column_values_to_be_between(power_w)", "blocking", True, "0.0%"),
        (day, "stg_gpu_samples", "expect_column_values_to_not_be_null(gpu_uuid)", "blocking", True, "0"),
        (day, "fct_gpu_energy_hourly", "expect_column_values_to_be_between(coverage_ratio)", "warning", False, "4.2%"),
    ])
    con.execute("CREATE TABLE quarantine_gpu_samples (day DATE, gpu_uuid VARCHAR, reason VARCHAR)")
    con.executemany("INSERT INTO quarantine_gpu_samples VALUES (?,?,?)",
                    [(day, "GPU-x", "power above 1.5x the limit")] * 7 + [(day, "GPU-y", "timestamp in the future")] * 3)
    con.execute("""CREATE TABLE fct_recommendation (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR,
        workload_class VARCHAR, power_limit_w DOUBLE, default_limit_w DOUBLE, locked_sm_clock_min_mhz INTEGER,
        locked_sm_clock_max_mhz INTEGER, expected_saving_pct DOUBLE, expected_slowdown_pct DOUBLE, reason VARCHAR)""")
    con.executemany("INSERT INTO fct_recommendation VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", [
        (day, h, u, m, "throughput", MODELS[m][0] * 0.8, MODELS[m][0], None, None, 10.0, 4.0, "best perf/W at 80% TDP")
        for h, u, m in gpus()
    ])


def hourly_context(day: dt.date = DAY) -> list[dict]:
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
    return [{"hour_at": start + dt.timedelta(hours=h), "intensity_gco2e_per_kwh": 40 + 25 * math.cos(h / 4),
             "price_usd_per_mwh": 60 + 30 * math.sin(h / 3)} for h in range(24)]


def energy_vs_limit() -> list[dict]:
    return [{"gpu_model": "NVIDIA A100-SXM4-80GB", "power_limit_w": w, "energy_kwh": 1.0 + ((w - 260) / 200) ** 2}
            for w in range(150, 401, 25)]


def build_context_and_shift(con: duckdb.DuckDBPyConnection, day: dt.date = DAY) -> None:
    """rpt_context_hourly (from hourly_context, plus the fleet's IT load) and a few
    rpt_shift_opportunity_daily rows, as carbon_day / tco_day write them."""
    con.execute("""CREATE TABLE rpt_context_hourly (hour_at TIMESTAMPTZ, day DATE, site VARCHAR, region VARCHAR,
        intensity_gco2e_per_kwh DOUBLE, price_usd_per_mwh DOUBLE, renewable_pct DOUBLE, fleet_it_energy_kwh DOUBLE,
        fleet_facility_energy_kwh DOUBLE)""")
    con.executemany("INSERT INTO rpt_context_hourly VALUES (?,?,?,?,?,?,?,?,?)", [
        (r["hour_at"], day, "site-a", "FR", r["intensity_gco2e_per_kwh"], r["price_usd_per_mwh"], 25.0,
         6.0 + 2 * math.sin(h / 4), 1.3 * (6.0 + 2 * math.sin(h / 4))) for h, r in enumerate(hourly_context(day))])
    con.execute("""CREATE TABLE rpt_shift_opportunity_daily (day DATE, site VARCHAR, team VARCHAR, job_id VARCHAR,
        energy_kwh DOUBLE, gpu_hours DOUBLE, carbon_saving_gco2e DOUBLE, cost_saving_usd DOUBLE,
        best_carbon_hour_at TIMESTAMPTZ, best_cost_hour_at TIMESTAMPTZ)""")
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
    con.executemany("INSERT INTO rpt_shift_opportunity_daily VALUES (?,?,?,?,?,?,?,?,?,?)", [
        (day, "site-a", "vision", "j0", 12.0, 20.0, 900.0, 0.4, start + dt.timedelta(hours=13), start + dt.timedelta(hours=3)),
        (day, "site-a", "search", "j3", 8.0, 10.0, 350.0, 0.9, start + dt.timedelta(hours=14), start + dt.timedelta(hours=4)),
    ])
