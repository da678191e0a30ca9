"""The daily HTML report: self-contained, every section present, honest about what is missing."""

from __future__ import annotations

import re

import duckdb
import pytest

from report_fixtures import DAY, build_day, energy_vs_limit, hourly_context
from plotly.offline import get_plotlyjs

from reports.html import render_report


@pytest.fixture()
def full_day():
    con = duckdb.connect()
    build_day(con)
    yield con
    con.close()


def test_full_report_is_self_contained_and_draws_every_figure(full_day, tmp_path):
    path = render_report(full_day, DAY, tmp_path / "r.html",
                         notes={"energy_vs_limit": energy_vs_limit(), "hourly_context": hourly_context(), "run": "test"})
    text = path.read_text()
    assert text.count(get_plotlyjs()[:300]) == 1  # plotly.js embedded once
    page_scripts = re.findall(r"<script[^>]*>", text.split(get_plotlyjs())[1])
    assert page_scripts and not any("src=" in tag for tag in page_scripts)  # nothing fetched: opens offline
    assert "Not computed" in text  # the fixture has no IPMI reconciliation
    assert "no IPMI data" in text
    # energy 3, power models 4 (fit, residuals, curve, thermal), carbon+cost 4, quality 2
    assert len(re.findall(r'id="fig-\d\d"', text)) == 13
    for heading in ("Summary", "Energy", "Power models", "Carbon and cost", "Data quality", "Recommendations"):
        assert f"<h2>{heading}</h2>" in text


def test_summary_numbers_add_up_from_the_relations(full_day, tmp_path):
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    energy = full_day.sql("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly").fetchall()[0][0]
    carbon = full_day.sql("SELECT sum(total_gco2e) / 1000 FROM rpt_carbon_daily").fetchall()[0][0]
    cost = full_day.sql("SELECT sum(total_cost_usd) FROM rpt_tco_daily").fetchall()[0][0]
    assert f"{energy:,.1f} kWh" in text and f"{carbon:,.1f} kgCO2e" in text and f"{cost:,.0f} USD" in text
    held_back = full_day.sql("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE gpu_model LIKE '%H100%'").fetchall()[0][0]
    saving = (energy - held_back) * 0.10  # every fixture GPU is promised 10%; the H100s are held back
    assert f"Cap 8 GPUs as recommended below: expected saving {saving:,.1f} kWh/day" in text
    assert "Held back (power model failed its gate): NVIDIA H100 80GB HBM3" in text


def test_every_axis_has_a_unit(full_day, tmp_path):
    text = render_report(full_day, DAY, tmp_path / "r.html",
                         notes={"energy_vs_limit": energy_vs_limit(), "hourly_context": hourly_context()}).read_text()
    titles = re.findall(r'"(?:xaxis|yaxis|yaxis2)":\{[^{}]*?"title":\{"text":"([^"]*)"', text)
    value_axes = [t for t in titles if t not in ("host", "team", "reason") and not t.startswith("GPU (")]
    assert value_axes and all(re.search(r"\([^)]*\)", t) for t in value_axes), value_axes


def test_an_empty_warehouse_says_what_it_could_not_compute(tmp_path):
    text = render_report(duckdb.connect(), DAY, tmp_path / "r.html").read_text()
    for phrase in ("no GPU energy (relation fct_gpu_energy_hourly does not exist)",
                   "no IPMI data", "no carbon account", "no cost account", "no data checks",
                   "no recommendations", "no power-model fits"):
        assert phrase in text
    assert 'id="fig-' not in text


def test_another_day_in_the_same_warehouse_is_reported_as_empty(full_day, tmp_path):
    text = render_report(full_day, "2026-01-05", tmp_path / "r.html").read_text()
    assert "fct_gpu_energy_hourly has no rows for 2026-01-05" in text


def test_rendering_twice_gives_the_same_page(full_day, tmp_path):
    a = render_report(full_day, DAY, tmp_path / "a.html").read_bytes()
    b = render_report(full_day, DAY, tmp_path / "b.html").read_bytes()
    assert a == b


def test_report_draws_context_and_shift_from_the_accounts_relations(tmp_path, shared_data):
    from accounting_world import DAY as ACCOUNTED_DAY, add_node_energy, build_world
    from collectors.settings import CarbonSettings, TcoSettings
    from reports.carbon import carbon_day
    from reports.tco import tco_day

    con = build_world()
    add_node_energy(con)
    con.execute("UPDATE raw_jobs SET \"deferrable\" = true WHERE job_id = 'train-1'")
    carbon_day(con, ACCOUNTED_DAY, CarbonSettings(), shared_data)
    tco_day(con, ACCOUNTED_DAY, TcoSettings(), shared_data)
    text = render_report(con, ACCOUNTED_DAY, tmp_path / "r.html").read_text()
    assert "no hourly grid context" not in text and "no shifting estimate" not in text
    for title in ("Grid carbon intensity against fleet load", "Electricity price against fleet load",
                  "What shifting deferrable jobs to the best hours would have saved"):
        assert title in text
    assert "fleet IT power (kW)" in text  # the load is the accounts' IT energy, BMC included
    assert "<td>train-1</td>" in text and "1 deferrable jobs" in text


def test_a_gpu_without_a_model_name_is_drawn_under_a_label(tmp_path):
    """An imported nvidia-smi log may not name its GPU model: the report still renders."""
    import datetime as dt

    import duckdb

    from reports.html import render_report
    from reports.warehouse_tables import UNKNOWN_GPU_MODEL

    con = duckdb.connect()
    day = dt.date(2026, 6, 11)
    con.execute("CREATE TABLE fct_gpu_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, gpu_uuid VARCHAR, "
                "gpu_model VARCHAR, energy_kwh DOUBLE, avg_power_w DOUBLE, coverage_ratio DOUBLE, energy_source VARCHAR)")
    con.execute("INSERT INTO fct_gpu_energy_hourly VALUES "
                "('2026-06-11 15:00:00+00', '2026-06-11', 'trace', 'GPU-x', NULL, 0.2, 200, 0.6, 'power_integral'),"
                "('2026-06-11 15:00:00+00', '2026-06-11', 'node-01', 'GPU-y', 'NVIDIA H200', 0.5, 500, 1.0, 'counter')")
    page = render_report(con, day, tmp_path / "r.html").read_text()
    assert UNKNOWN_GPU_MODEL in page and "NVIDIA H200" in page
