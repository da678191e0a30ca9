"""Full `joulehouse run`s of small simulated days, through Airflow's dag.test().

What a user relies on: the run succeeds; the warehouse holds the day's energy, power models,
carbon, cost and recommendations; the report and the signed export exist and verify; two
consecutive days build on each other; and re-running the first day replaces its outputs with
the same results without touching the second day's.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from joulehouse.collectors.config_contract import generate_keypair, load_public_key, verify_config
from joulehouse.settings import load_settings, settings_to_toml
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.cli.demo_run import demo_settings
from joulehouse.cli.main import app

DAY = dt.date(2026, 6, 10)
NEXT_DAY = DAY + dt.timedelta(days=1)
pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture(scope="module")
def site(tmp_path_factory, shared_data) -> Path:
    out = tmp_path_factory.mktemp("run")
    settings = demo_settings(out, shared_data)
    (out / "joulehouse.toml").write_text(settings_to_toml(settings))
    simulate_fleet(Path(settings.lake.path), gpus=16, days=2, start=DAY, seed=3, interval_s=10.0)
    generate_keypair(out / "keys")
    return out


def _warehouse_snapshot(db: Path, day: dt.date = DAY) -> dict:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            "energy": con.execute(
                "SELECT gpu_uuid, hour_at, round(energy_kwh, 9), coverage_ratio FROM fct_gpu_energy_hourly "
                "WHERE day = ? ORDER BY ALL", [day]).fetchall(),
            "models": con.execute(
                "SELECT gpu_model, n_samples, round(mape_pct, 6) FROM fct_power_model WHERE day = ? ORDER BY ALL",
                [day]).fetchall(),
            "recommendations": con.execute(
                "SELECT gpu_uuid, power_limit_w FROM fct_recommendation WHERE day = ? ORDER BY ALL", [day]).fetchall(),
            "carbon": con.execute(
                "SELECT job_id, round(total_gco2e, 6) FROM rpt_carbon_daily WHERE day = ? ORDER BY ALL", [day]).fetchall(),
        }
    finally:
        con.close()


# When a row was written or by which build, not what it says: differs on every run by design.
RUN_STAMPS = {"build_id", "built_at", "reference_at", "samples_build_id", "generated_at", "fitted_at", "checked_at",
              "computed_at", "created_at", "run_at", "validated_at", "exported_at", "rendered_at",
              "completed_at"}


# The list of the readings' files: their names carry the build's token; what they hold is compared
# through the view stg_gpu_samples.
RUN_NAMED = {"stg_gpu_samples_files"}


def _every_day_table(db: Path, day: dt.date = DAY) -> dict:
    """Every warehouse table or view with a `day` column (stg_gpu_samples is a view over the
    readings' files): the day's rows, all columns but run stamps."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        tables = [t for (t,) in con.execute(
            "SELECT table_name FROM duckdb_columns() WHERE column_name = 'day' AND NOT internal "
            "AND schema_name = 'main' AND table_name IN (SELECT table_name FROM duckdb_tables() "
            "UNION ALL SELECT view_name FROM duckdb_views() WHERE NOT internal) ORDER BY 1").fetchall()
            if t not in RUN_NAMED]
        out = {}
        for table in tables:
            columns = [c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = ? "
                                                 "ORDER BY column_index", [table]).fetchall() if c not in RUN_STAMPS]
            out[table] = con.execute(f"SELECT {', '.join(columns)} FROM {table} WHERE day = ? ORDER BY ALL",
                                     [day]).fetchall()
        return out
    finally:
        con.close()


def _differences(a: dict, b: dict) -> dict:
    """Tables whose rows differ, floats compared to 1e-9 relative (a residual of two sums, or a
    parallel sum, may move in its last bits), with the first differing row of each."""
    def same(x, y) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-12) or (math.isnan(x) and math.isnan(y))
        return x == y

    out = {}
    for table in sorted(a.keys() | b.keys()):
        rows_a, rows_b = a.get(table, []), b.get(table, [])
        bad = [(ra, rb) for ra, rb in zip(rows_a, rows_b) if not all(map(same, ra, rb))]
        if len(rows_a) != len(rows_b) or bad:
            out[table] = (len(rows_a), len(rows_b), bad[:1])
    return out


def test_two_days_through_airflow_and_a_rerun_of_the_first_is_identical(site, monkeypatch):
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--date", DAY.isoformat(), "--config", str(site / "joulehouse.toml")])
    assert result.exit_code == 0, result.output

    db = site / "warehouse.duckdb"
    first = _warehouse_snapshot(db)
    every_first = _every_day_table(db)
    assert len(every_first) >= 25 and all(every_first[t] for t in ("fct_gpu_energy_hourly", "rpt_tco_daily",
                                                                   "fct_thermal_gpu", "fct_check_results"))
    assert len({row[0] for row in first["energy"]}) == 16, "every simulated GPU has hourly energy"
    assert len(first["energy"]) == 16 * 24
    assert sum(r[2] for r in first["energy"]) > 0
    assert {m[0] for m in first["models"]} >= {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}

    con = duckdb.connect(str(db), read_only=True)
    try:
        rates = con.execute("SELECT DISTINCT demand_charge_usd_per_kw_month FROM fct_recommendation WHERE day = ?",
                            [DAY]).fetchall()
    finally:
        con.close()
    site_rate = load_settings(site / "joulehouse.toml").tco.demand_charge_usd_per_kw_month
    assert site_rate > 0 and rates == [(site_rate,)], "the recommender prices the site's own demand charge"

    report = site / "reports" / f"{DAY}.html"
    assert report.exists() and report.stat().st_size > 100_000  # plotly.js is embedded
    export = site / "export" / "recommended-config.json"
    doc = json.loads(export.read_text())
    config = verify_config(doc, load_public_key(site / "keys" / "joulehouse-ed25519.pub.pem"),
                           now=dt.datetime.fromisoformat(doc["body"]["valid_from"]))
    assert config.settings, "the export carries at least one GPU setting"
    # The next day's hours for deferrable work: the daily run hands the site's price file to the
    # advice, which says why it fell back to persistence (the demo's 2025 prices hold no 2026 day).
    advice = json.loads((site / "export" / "placement-advice.json").read_text())["body"]
    price_file = Path(load_settings(site / "joulehouse.toml").tco.price_file).name
    assert price_file and all(price_file in s["forecast_basis"] for s in advice["sites"].values()), advice["sites"]
    # The day's headline as metrics, for node_exporter's textfile collector on the analytics host.
    from prometheus_client.parser import text_string_to_metric_families

    headline = {s.name: s.value for family in text_string_to_metric_families(
        (site / "metrics" / "joulehouse_daily.prom").read_text()) for s in family.samples}
    assert math.isclose(headline["joulehouse_daily_gpu_energy_kwh"], sum(r[2] for r in first["energy"]), rel_tol=1e-6)
    assert headline["joulehouse_daily_recommendations_exported"] == len(config.settings)
    assert headline["joulehouse_daily_blocking_checks_failed"] == 0 and headline["joulehouse_daily_gpus"] == 16

    export_bytes = export.read_bytes()
    # [export] publish_url set: `run` publishes as joulehouse_publish would under a scheduler (it
    # said success and the agents' location stayed empty)
    monkeypatch.setenv("JOULEHOUSE_EXPORT__PUBLISH_URL", str(site / "published"))
    result = runner.invoke(app, ["run", "--date", NEXT_DAY.isoformat(), "--config", str(site / "joulehouse.toml")])
    assert result.exit_code == 0, result.output
    assert "published the recommended config" in result.output
    assert (site / "published" / "recommended-config.json").read_bytes() == export.read_bytes()
    monkeypatch.delenv("JOULEHOUSE_EXPORT__PUBLISH_URL")
    second = _warehouse_snapshot(db, NEXT_DAY)
    every_second = _every_day_table(db, NEXT_DAY)
    assert len(second["energy"]) == 16 * 24 and second != first

    result = runner.invoke(app, ["run", "--date", DAY.isoformat(), "--config", str(site / "joulehouse.toml")])
    assert result.exit_code == 0, result.output
    assert _warehouse_snapshot(db) == first, "re-running a day gives the same rows"
    assert _warehouse_snapshot(db, NEXT_DAY) == second, "re-running a day leaves the other days alone"
    again = _every_day_table(db)
    assert _differences(again, every_first) == {}, "every table of the re-run day is the same"
    assert _differences(_every_day_table(db, NEXT_DAY), every_second) == {}, "the other day is untouched"
    assert (site / "export" / f"recommended-config-{DAY}.json").read_bytes() == export_bytes
    # Downstream DAGs learn which day is fresh: each Asset event says its day.
    with sqlite3.connect(site / "airflow" / "airflow.db") as meta:
        events = meta.execute("SELECT a.name, e.extra FROM asset_event AS e JOIN asset AS a ON a.id = e.asset_id "
                              "ORDER BY e.id").fetchall()
    days = [json.loads(extra)["day"] for name, extra in events if name == "joulehouse_warehouse_day"]
    assert days == [str(DAY), str(NEXT_DAY), str(DAY)]


def test_a_day_the_lake_has_no_readings_for_fails_and_says_why(site):
    """A run over an empty day (a wrong date or lake path, nodes that did not ship) used to skip
    every step and report success; it must fail, say why, and build nothing. It is said before
    Airflow starts (the DAG's own first task says the same: tests/cli/test_dagrun.py)."""
    empty_day = DAY + dt.timedelta(days=9)
    result = CliRunner().invoke(app, ["run", "--date", empty_day.isoformat(), "--config", str(site / "joulehouse.toml")])
    assert result.exit_code == 2, result.output
    text = " ".join(result.output.split())  # rich wraps long lines
    assert f"no GPU readings for {empty_day}" in text
    assert "check [lake] path" in text, "the settings section is printed, not eaten as markup"
    assert not (site / "airflow" / "logs" / f"joulehouse-run-{empty_day}.log").exists(), "Airflow never started"
    assert not (site / "reports" / f"{empty_day}.html").exists()


def test_a_real_trace_day_before_the_dags_start_goes_through_the_same_dag(site, shared_data):
    """The real RTX 4090 log (2026-01-03, no power.limit column; its limits are the catalogue's):
    its day builds, fits and reports; its GPU gets no setting and says why (a quarter of an hour
    held out is too little to pass the fit's gate); the file agents poll stays the newest day's."""
    from joulehouse.collectors.ingest.nvidia_smi import ingest_nvidia_smi
    from joulehouse.settings import load_settings

    settings = load_settings(site / "joulehouse.toml")
    trace = shared_data / "telemetry" / "vlm_optimization_gpu_log_rtx4090_1hz.csv"
    ingest_nvidia_smi(trace, lake=settings.lake.path, host="trace-rtx4090", gpu_model="NVIDIA GeForce RTX 4090")
    trace_day = dt.date(2026, 1, 3)
    result = CliRunner().invoke(app, ["run", "--date", trace_day.isoformat(), "--config", str(site / "joulehouse.toml")])
    assert result.exit_code == 0, result.output

    con = duckdb.connect(str(site / "warehouse.duckdb"), read_only=True)
    try:
        (kwh,) = con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE day = ? AND host = 'trace-rtx4090'",
                             [trace_day]).fetchone()
        recs = con.execute("SELECT power_limit_w, reason FROM fct_recommendation WHERE day = ? AND host = 'trace-rtx4090'",
                           [trace_day]).fetchall()
    finally:
        con.close()
    assert kwh is not None and kwh > 0.1, "the trace's measured energy is in the warehouse"
    assert recs and all(limit is None and "failed its gate (only" in reason and reason.endswith("not recommended")
                        for limit, reason in recs)
    assert (site / "reports" / f"{trace_day}.html").exists()
    polled = json.loads((site / "export" / "recommended-config.json").read_bytes())["body"]["day"]
    dated = sorted(p.stem.removeprefix("recommended-config-") for p in (site / "export").glob("recommended-config-*.json"))
    assert polled == dated[-1] and trace_day.isoformat() in dated
