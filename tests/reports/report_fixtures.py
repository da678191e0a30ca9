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


OUTCOME_POOLED = ("NVIDIA A100-SXM4-80GB", 400.0, 320.0, 12.0, 8.5, 15.5, 10.0)  # model, before W, after W, realised %, CI, predicted %


def build_analysis(con: duckdb.DuckDBPyConnection, day: dt.date = DAY) -> None:
    """The models' and checks' relations the report shows beyond build_day: sensitivities, best
    power interval, cross-model job prediction, consolidation and placement, efficiency, outcome, coverage, node
    reconciliation and PUE. Shapes follow models/sql and warehouse/sql; values are made up."""
    start = dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)
    con.execute("""CREATE TABLE fct_sensitivity_daily (day DATE, quantity VARCHAR, scope VARCHAR, estimate DOUBLE,
        ci_low DOUBLE, ci_high DOUBLE, std_error DOUBLE, n_obs BIGINT, n_groups BIGINT, method VARCHAR, unit VARCHAR)""")
    con.executemany("INSERT INTO fct_sensitivity_daily VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
        (day, "energy_elasticity_to_utilization", "fleet", 0.51, 0.47, 0.55, 0.02, 700, 12, "ols-fe", "d ln(energy) / d ln(ratio)"),
        (day, "energy_elasticity_to_memory_bandwidth", "fleet", 0.08, 0.05, 0.12, 0.02, 700, 12, "ols-fe", "d ln(energy) / d ln(ratio)"),
        (day, "pue_per_outdoor_c", "site-a", 0.0079, 0.0078, 0.0080, 0.00005, 24, 1, "ols", "1/C"),
    ])
    con.execute("""CREATE TABLE fct_power_interval (day DATE, gpu_model VARCHAR, bottleneck VARCHAR, busy_share DOUBLE,
        best_limit_w DOUBLE, best_limit_w_low DOUBLE, best_limit_w_high DOUBLE, default_limit_w DOUBLE,
        perf_per_watt_gain_pct DOUBLE, slowdown_at_best_pct DOUBLE)""")
    con.executemany("INSERT INTO fct_power_interval VALUES (?,?,?,?,?,?,?,?,?,?)", [
        (day, m, "compute-bound", 0.6, 0.7 * limit, 0.65 * limit, 0.75 * limit, limit, 18.0, 6.0) for m, (limit, _) in MODELS.items()])
    con.execute("""CREATE TABLE fct_job_energy_prediction (day DATE, job_id VARCHAR, from_gpu_model VARCHAR, to_gpu_model VARCHAR,
        target_job_id VARCHAR, predicted_energy_kwh DOUBLE, measured_energy_kwh DOUBLE, source_energy_kwh DOUBLE,
        error_pct DOUBLE, time_scale DOUBLE)""")
    a100, h100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"
    con.executemany("INSERT INTO fct_job_energy_prediction VALUES (?,?,?,?,?,?,?,?,?,?)", [
        (day, "ft-a100", a100, h100, "ft-h100", 1.10, 1.12, 0.66, -1.8, 1.0),
        (day, "ft-h100", h100, a100, "ft-a100", 0.67, 0.66, 1.12, 1.5, 1.0),
    ])
    con.execute("""CREATE TABLE fct_recommendation_extra (day DATE, kind VARCHAR, host VARCHAR, gpu_uuid VARCHAR,
        detail VARCHAR, expected_saving_kwh_per_day DOUBLE)""")
    g = gpus()
    con.executemany("INSERT INTO fct_recommendation_extra VALUES (?,?,?,?,?,?)", [
        (day, "consolidation", g[0][0], g[0][1], "free this GPU: its work fits on node-01's other idle GPUs", 1.25),
        (day, "consolidation", g[1][0], g[1][1], "free this GPU: its work fits on node-01's other idle GPUs", 1.25),
        (day, "thermal_placement", g[4][0], g[4][1], "give the hottest work to this low-theta GPU", 0.1),
    ])
    con.execute("""CREATE TABLE fct_job_efficiency (day DATE, job_id VARCHAR, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR,
        stage VARCHAR, workload_class VARCHAR, team VARCHAR, busy_hours DOUBLE, power_limit_w DOUBLE, power_limit_changed BOOLEAN,
        energy_kwh DOUBLE, requests_total DOUBLE, tokens_total DOUBLE, samples_total DOUBLE, flops_total DOUBLE)""")
    jobs = []
    for k, (host, uuid, model) in enumerate(g):
        limit_w = MODELS[model][0]
        jobs.append((day, f"serve-{k}", host, uuid, model, "inference", "latency-sensitive", "search", 10.0, limit_w, False,
                     3.0, 9000.0 * (k + 1), 2e6, None, None))
        jobs.append((day, f"train-{k}", host, uuid, model, "training", "throughput", "vision", 12.0, limit_w, False,
                     4.0, None, None, 5e4, 4e18))
    con.executemany("INSERT INTO fct_job_efficiency VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", jobs)
    con.execute("""CREATE TABLE fct_efficiency_setting_daily AS
        SELECT day, gpu_model, power_limit_w, stage, workload_class, count(DISTINCT job_id) AS n_jobs,
               sum(energy_kwh) AS energy_kwh, sum(requests_total) / sum(energy_kwh) AS requests_per_kwh,
               sum(energy_kwh) * 3.6e6 / sum(tokens_total) AS j_per_token, sum(energy_kwh) * 3.6e6 / sum(samples_total) AS j_per_sample,
               sum(flops_total) / (sum(energy_kwh) * 3.6e6) AS flops_per_w
        FROM fct_job_efficiency GROUP BY ALL""")
    con.execute(OUTCOME_DDL)
    model, before, after, realised, low, high, predicted = OUTCOME_POOLED
    a100_gpus = [x for x in g if x[2] == model]
    rows = [(day, "model_setting", None, None, model, day - dt.timedelta(days=3), "agent_audit+samples", "matched_jobs",
             before, after, "flop", len(a100_gpus), 4, 3, 3, 100.0, 88.0, realised, low, high, predicted, 3.0, 4.0, None)]
    rows += [(day, "gpu", h, u, m, day - dt.timedelta(days=3), "samples", "gpu_day", before, after, "active_hour", 1, 4, 3, 3,
              100.0, 90.0, 10.0 + i, 2.0 + i, 18.0 + i, predicted, None, 4.0, "few jobs span treated and control GPUs")
             for i, (h, u, m) in enumerate(a100_gpus[:2])]
    con.executemany(f"INSERT INTO fct_recommendation_outcome VALUES ({','.join('?' * 24)})", rows)
    con.execute("""CREATE TABLE fct_gpu_coverage_daily (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR,
        in_inventory BOOLEAN, n_samples BIGINT, coverage_ratio DOUBLE, n_gaps BIGINT, longest_gap_s DOUBLE, staleness_s DOUBLE)""")
    con.executemany("INSERT INTO fct_gpu_coverage_daily VALUES (?,?,?,?,?,?,?,?,?,?)", [
        (day, h, u, m, True, 86400 - 5000 * (k == 3), 1.0 - 0.06 * (k == 3), 2 * (k == 3), 2500.0 if k == 3 else None,
         900.0 if k == 5 else 1.0) for k, (h, u, m) in enumerate(g)])
    con.execute("""CREATE TABLE fct_node_reconciliation_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, node_energy_kwh DOUBLE,
        gpu_energy_kwh DOUBLE, residual_kwh DOUBLE, residual_share DOUBLE)""")
    con.executemany("INSERT INTO fct_node_reconciliation_hourly VALUES (?,?,?,?,?,?,?)", [
        (start + dt.timedelta(hours=h), day, host, 4.0, 3.0, 1.0, 0.25) for h in range(24) for host in ("node-01", "node-02")])
    con.execute("""CREATE TABLE fct_pue_hourly (hour_at TIMESTAMPTZ, day DATE, site VARCHAR, pue DOUBLE, it_energy_kwh DOUBLE,
        facility_energy_kwh DOUBLE)""")
    con.executemany("INSERT INTO fct_pue_hourly VALUES (?,?,?,?,?,?)", [
        (start + dt.timedelta(hours=h), day, "site-a", 1.2 + 0.01 * h, 10.0, 10.0 * (1.2 + 0.01 * h)) for h in range(24)])


OUTCOME_DDL = """CREATE TABLE fct_recommendation_outcome (day DATE, scope VARCHAR, host VARCHAR, gpu_uuid VARCHAR,
    gpu_model VARCHAR, effective_day DATE, evidence VARCHAR, method VARCHAR, power_limit_w_before DOUBLE,
    power_limit_w_after DOUBLE, outcome_unit VARCHAR, n_treated_gpus INTEGER, n_control_gpus INTEGER, n_days_before INTEGER,
    n_days_after INTEGER, energy_j_per_unit_before DOUBLE, energy_j_per_unit_after DOUBLE, realised_saving_pct DOUBLE,
    saving_ci_low_pct DOUBLE, saving_ci_high_pct DOUBLE, predicted_saving_pct DOUBLE, realised_slowdown_pct DOUBLE,
    predicted_slowdown_pct DOUBLE, note VARCHAR)"""
