"""The daily HTML report: self-contained, every section present, honest about what is missing."""

from __future__ import annotations

import datetime as dt
import html
import re

import duckdb
import pytest

from report_fixtures import OUTCOME_DDL, OUTCOME_POOLED, DAY, build_analysis, build_context_and_shift, build_day, energy_vs_limit, hourly_context
from plotly.offline import get_plotlyjs

from joulehouse.reports.page.blocks import plotly_file_name
from joulehouse.reports.page.render import render_report


@pytest.fixture()
def full_day():
    con = duckdb.connect()
    build_day(con)
    yield con
    con.close()


@pytest.mark.slow
def test_full_report_is_self_contained_and_draws_every_figure(full_day, tmp_path):
    path = render_report(full_day, DAY, tmp_path / "r.html",
                         notes={"energy_vs_limit": energy_vs_limit(), "hourly_context": hourly_context(), "run": "test"})
    text = path.read_text()
    # plotly.js loaded once, from the one copy beside every day's report: the page holds its data only
    assert re.findall(r'<script[^>]*src="([^"]*)"', text) == [plotly_file_name()]
    assert (tmp_path / plotly_file_name()).read_text() == get_plotlyjs()
    assert get_plotlyjs()[:300] not in text and len(text) < len(get_plotlyjs()) / 4
    # the inline page is one file to mail: plotly.js embedded once, nothing fetched, opens offline
    single = render_report(full_day, DAY, tmp_path / "single" / "r.html", plotly_js="inline").read_text()
    assert single.count(get_plotlyjs()[:300]) == 1
    page_scripts = re.findall(r"<script[^>]*>", single.split(get_plotlyjs())[1])
    assert page_scripts and not any("src=" in tag for tag in page_scripts)
    assert not (tmp_path / "single" / plotly_file_name()).exists()
    assert "Not computed" in text  # the fixture has no IPMI reconciliation
    assert "no IPMI data" in text
    # energy 3, power models 4 (fit, residuals, curve, thermal), carbon+cost 4, quality 2 (quarantine, coverage)
    assert len(re.findall(r'id="fig-\d\d"', text)) == 13
    for heading in ("Summary", "Recommendations", "Energy", "Efficiency", "Power models", "Carbon and cost", "Data quality"):
        assert f"<h2>{heading}</h2>" in text


@pytest.mark.slow
def test_summary_numbers_add_up_from_the_relations(full_day, tmp_path):
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    energy = full_day.sql("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly").fetchall()[0][0]
    carbon = full_day.sql("SELECT sum(total_gco2e) / 1000 FROM rpt_carbon_daily").fetchall()[0][0]
    cost = full_day.sql("SELECT sum(total_cost_usd) FROM rpt_tco_daily").fetchall()[0][0]
    assert f"{energy:,.1f} kWh" in text and f"{carbon:,.1f} kgCO2e" in text and f"{cost:,.0f} USD" in text
    assert "Not computed: no IPMI data" in text  # build_day has no node reconciliation...
    summary = text[text.index('<section id="summary">'):text.index('<section id="recommendations">')]
    assert "node_samples dataset (IPMI/BMC readings)" in summary  # ...and the summary names the missing dataset


def _energy(con, model: str) -> float:
    return con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE gpu_model = ?", [model]).fetchall()[0][0]


@pytest.mark.slow
def test_summary_lists_the_top_three_actions_by_energy_saved(full_day, tmp_path):
    build_analysis(full_day)
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    todo = re.search(r'<ol class="todo">(.*?)</ol>', text).group(1)
    items = re.findall(r"<li>(.*?)</li>", todo)
    assert len(items) == 3
    # every fixture cap promises 10% of the GPU's day; consolidation frees 2 GPUs at 1.25 kWh/day each;
    # thermal placement (0.1 kWh/day) and the H100 caps (gate failed) do not make the list
    h200, a100 = 0.10 * _energy(full_day, "NVIDIA H200"), 0.10 * _energy(full_day, "NVIDIA A100-SXM4-80GB")
    expected = sorted([(h200, "NVIDIA H200"), (2.5, "Consolidate"), (a100, "NVIDIA A100-SXM4-80GB")], reverse=True)
    for item, (kwh, what) in zip(items, expected):
        assert what in item and f"saves about {kwh:,.1f} kWh/day" in item, item
    assert not any("H100" in i or "Thermal" in i for i in items)
    assert ("Held back (the export leaves them out; a node agent returns their GPUs to their defaults): "
            "NVIDIA H100 80GB HBM3: held-out MAPE") in text


@pytest.mark.slow
def test_the_report_holds_back_what_the_export_leaves_out(full_day, tmp_path):
    """The page and the signed file agree: a GPU with no limit recommended is not a setting to
    apply, and a model with no power model fitted is listed as left out, as the export does."""
    from joulehouse.reports.export.selection import gate_by_model
    from joulehouse.reports.export.signed_config import build_body
    from joulehouse.reports.page.relations import ReportData

    full_day.execute("INSERT INTO fct_recommendation VALUES (?, 'trace', 'GPU-t', NULL, 'throughput', NULL, NULL, "
                     "NULL, NULL, NULL, NULL, 'limits unknown: not recommended')", [DAY])
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    data = ReportData(full_day, DAY, {})
    changing = data.to_apply
    assert "GPU-t" not in changing["gpu_uuid"].to_list()
    total = full_day.execute("SELECT count(*) FROM fct_recommendation WHERE day = ?", [DAY]).fetchone()[0]
    held = data.held_back
    assert set(held) == {"NVIDIA H100 80GB HBM3", "GPU model not reported"}
    body = build_body(data.recs, gate_by_model(data.models, None), day=DAY, site="s", now=dt.datetime(2026, 6, 12,
                      tzinfo=dt.timezone.utc), validity_hours=24)
    in_file = sum(len(gpus) for gpus in body["hosts"].values())
    assert f"Settings in the signed export ({in_file} of {total} GPUs)" in text
    assert f"{changing.height} of them change a GPU" in text
    assert {m["gpu_model"] for m in body["excluded_gpu_models"]} == set(held)
    assert "GPU model not reported: no power model was fitted" in text
    assert "none left out of the export" not in text


@pytest.mark.slow
def test_summary_shows_both_scope2_carbon_figures(full_day, tmp_path):
    full_day.execute("ALTER TABLE rpt_carbon_daily ADD COLUMN total_market_gco2e DOUBLE")
    full_day.execute("UPDATE rpt_carbon_daily SET total_market_gco2e = 3 * total_gco2e")
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    location, market = full_day.execute(
        "SELECT sum(total_gco2e) / 1000, sum(total_market_gco2e) / 1000 FROM rpt_carbon_daily").fetchall()[0]
    assert "carbon, location-based" in text and f"{location:,.1f} kgCO2e" in text
    assert "carbon, market-based" in text and f"{market:,.1f} kgCO2e" in text


@pytest.mark.slow
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


@pytest.mark.slow
def test_rendering_twice_gives_the_same_page(full_day, tmp_path):
    a = render_report(full_day, DAY, tmp_path / "a.html").read_bytes()
    b = render_report(full_day, DAY, tmp_path / "b.html").read_bytes()
    assert a == b


@pytest.mark.slow
def test_report_draws_context_and_shift_from_the_accounts_relations(tmp_path, shared_data):
    from accounting_world import DAY as ACCOUNTED_DAY, add_node_energy, build_world
    from joulehouse.settings import CarbonSettings, TcoSettings
    from joulehouse.reports.accounts.carbon import carbon_day
    from joulehouse.reports.accounts.tco import tco_day

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

    from joulehouse.reports.page.blocks import plotly_file_name
    from joulehouse.reports.page.render import render_report
    from joulehouse.reports.warehouse_tables import UNKNOWN_GPU_MODEL

    con = duckdb.connect()
    day = dt.date(2026, 6, 11)
    con.execute("CREATE TABLE fct_gpu_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, gpu_uuid VARCHAR, "
                "gpu_model VARCHAR, energy_kwh DOUBLE, avg_power_w DOUBLE, coverage_ratio DOUBLE, energy_source VARCHAR)")
    con.execute("INSERT INTO fct_gpu_energy_hourly VALUES "
                "('2026-06-11 15:00:00+00', '2026-06-11', 'trace', 'GPU-x', NULL, 0.2, 200, 0.6, 'power_integral'),"
                "('2026-06-11 15:00:00+00', '2026-06-11', 'node-01', 'GPU-y', 'NVIDIA H200', 0.5, 500, 1.0, 'counter')")
    page = render_report(con, day, tmp_path / "r.html").read_text()
    assert UNKNOWN_GPU_MODEL in page and "NVIDIA H200" in page


def _figure_json(text: str, title: str) -> str:
    """The plotly JSON of the figure whose title is `title`."""
    at = text.index(f'"text":"{title}"')
    return text[text.rindex("Plotly.newPlot", 0, at):at]


@pytest.mark.slow
def test_outcome_figure_shows_realised_saving_with_its_interval_next_to_the_prediction(full_day, tmp_path):
    build_analysis(full_day)
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    fig = _figure_json(text, "What the recommendations saved: realised vs predicted")
    model, before, after, realised, low, high, predicted = OUTCOME_POOLED
    errors = re.search(r'"error_x":\{"array":\[([^\]]*)\],"arrayminus":\[([^\]]*)\]', fig)
    assert errors, "realised saving drawn without its confidence interval"
    above, below = [float(v) for v in errors.group(1).split(",")], [float(v) for v in errors.group(2).split(",")]
    # pooled row first: the bar spans exactly the stored 95% interval
    assert above[0] == pytest.approx(high - realised) and below[0] == pytest.approx(realised - low)
    assert '"name":"predicted"' in fig
    assert f"realised {realised:.1f}% (95% CI {low:.1f} to {high:.1f}%), predicted {predicted:.1f}%" in text
    assert "matched_jobs" in text and "gpu_day" in text  # the method of each row is stated
    assert "No recommendation has taken effect yet" not in text
    # the summary says it too, next to what was predicted (one pooled row in the fixture)
    summary = text[text.index('<section id="summary">'):text.index('<section id="recommendations">')]
    assert re.search(rf"<b>What the applied settings saved: </b>1 setting measured on \d+ GPUs?, {realised:.1f}% less "
                     rf"energy per unit of work on average, where {predicted:.1f}% less was predicted", summary), summary


@pytest.mark.slow
def test_outcome_says_plainly_when_nothing_has_taken_effect_and_when_it_was_not_measured(full_day, tmp_path):
    text = render_report(full_day, DAY, tmp_path / "a.html").read_text()
    assert ("realised savings not measured (relation fct_recommendation_outcome does not exist; "
            "it needs the outcome step") in text
    full_day.execute(OUTCOME_DDL)  # the step ran, but no GPU's limit changed yet
    text = render_report(full_day, DAY, tmp_path / "b.html").read_text()
    assert "No recommendation has taken effect yet" in text
    assert "realised savings not measured" not in text


@pytest.mark.slow
def test_new_sections_draw_from_their_relations(full_day, tmp_path):
    build_analysis(full_day)
    text = html.unescape(render_report(full_day, DAY, tmp_path / "r.html", notes={"energy_vs_limit": energy_vs_limit()}).read_text())
    for title in ("Sensitivities with 95% confidence intervals", "Job energy predicted on another GPU model vs measured there",
                  "Energy per unit of work by GPU model and power limit", "Coverage per GPU",
                  "Node reconciliation: server energy not drawn by its GPUs", "PUE by hour"):
        assert f'"text":"{title}"' in text, title
    forest = _figure_json(text, "Sensitivities with 95% confidence intervals")
    above = re.search(r'"error_x":\{"array":\[([^,\]]*)', forest).group(1)
    assert float(above) == pytest.approx(0.55 - 0.51)  # the utilization elasticity's upper half-interval
    assert "best limit, low (W)" in text and "perf per watt gain (%)" in text
    assert "mean absolute error 1.6%, worst 1.8%" in text  # |-1.8| and |1.5|
    assert "consolidation: 2 GPUs, about 2.50 kWh/day" in text
    # efficiency: ratios of sums per GPU model and limit; the A100 serve jobs did 9000..36000 requests on 3 kWh each
    a100_requests = sum(9000.0 * (k + 1) for k in range(4))
    assert f"{a100_requests / 12.0:,.0f}" in text
    assert "Checks: blocking: 2 of 2 passed; warning: 0 of 1 passed" in text
    assert "12 GPUs reported; 2 below 95% of the day covered" in text  # one with gaps, one silent for 900 s
    assert "25.0% of the servers' BMC energy is not drawn by their GPUs" in text
    assert "Day PUE" in text and "Not computed: no PUE" not in text


@pytest.mark.slow
def test_every_numeric_column_header_names_its_unit(full_day, tmp_path):
    build_analysis(full_day)
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    unitless = []
    for tbl in re.findall(r"<table>(.*?)</table>", text):
        heads = re.findall(r'<th title="[^"]*">([^<]*)</th>', tbl)
        first = re.search(r"<tbody><tr[^>]*>(.*?)</tr>", tbl)
        if not first:
            continue
        cells = re.findall(r"<td( class=\w+)?>", first.group(1))
        unitless += [h for h, c in zip(heads, cells) if c == " class=n" and "(" not in h]
    assert not unitless, unitless


def test_long_tables_are_capped_and_say_how_many_rows_are_hidden(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE fct_recommendation_extra (day DATE, kind VARCHAR, host VARCHAR, gpu_uuid VARCHAR, "
                "detail VARCHAR, expected_saving_kwh_per_day DOUBLE)")
    con.executemany("INSERT INTO fct_recommendation_extra VALUES (?,?,?,?,?,?)",
                    [(DAY, "thermal_placement", "node-01", f"GPU-{i:03d}", "swap", 0.01 * i) for i in range(40)])
    text = render_report(con, DAY, tmp_path / "r.html").read_text()
    section = text[text.index("Consolidation and thermal placement"):text.index("What the last recommendations saved")]
    assert section.count("<tr>") == 1 + 6  # header + the 6 largest savings
    assert "34 more rows hidden (40 in all; query SELECT * FROM fct_recommendation_extra for every row)" in section
    assert "GPU-039" in section and "GPU-000" not in section


@pytest.mark.slow
def test_the_carbon_and_cost_cards_say_which_residual_mix_and_which_green_premium_hours(full_day, tmp_path):
    full_day.execute("ALTER TABLE rpt_carbon_daily ADD COLUMN total_market_gco2e DOUBLE")
    full_day.execute("ALTER TABLE rpt_carbon_daily ADD COLUMN market_basis VARCHAR")
    basis = ("no energy contracts (PPA/REC); residual mix of FR 17.11 gCO2/kWh (AIB European Residual Mixes 2025, "
             "Version 1.0 (2026-05-26), Table 2, data year 2025)")
    full_day.execute("UPDATE rpt_carbon_daily SET total_market_gco2e = total_gco2e, market_basis = ?", [basis])
    build_context_and_shift(full_day)
    full_day.execute("ALTER TABLE rpt_context_hourly ADD COLUMN green_premium_applies BOOLEAN")
    full_day.execute("UPDATE rpt_context_hourly SET green_premium_applies = hour(hour_at) < 9")
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    assert "residual mix of FR 17.11 gCO2/kWh (AIB European Residual Mixes 2025" in text
    assert "in the 9 of 24 site-hours its rule selects" in text
    # A day without a residual mix: the card says so instead of a figure.
    full_day.execute("UPDATE rpt_carbon_daily SET total_market_gco2e = NULL, market_basis = "
                     "'no energy contracts (PPA/REC); residual mix of US-MIDA-PJM not available (no published residual mix)'")
    text = render_report(full_day, DAY, tmp_path / "r2.html").read_text()
    assert "not available: no energy contracts (PPA/REC); residual mix of US-MIDA-PJM not available" in text


@pytest.mark.slow
def test_no_block_of_the_page_shows_its_markup_as_text(full_day, tmp_path):
    """Every section hands the template Markup or plain text: an HTML string passed as text comes
    out escaped (a visible '<h3>' on the page)."""
    build_analysis(full_day)
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    assert not re.findall(r"&lt;/?(?:div|p|ul|li|h3|b|table|a|details)\b", text)


@pytest.mark.slow
def test_sensitivities_speak_plain_words_with_the_statistics_folded(full_day, tmp_path):
    build_analysis(full_day)
    text = render_report(full_day, DAY, tmp_path / "r.html").read_text()
    models = text[text.index('<section id="models">'):text.index('<section id="carbon-cost">')]
    heading = models.index("<h3>Sensitivities</h3>")
    plain, fold = models[heading:].split("<details>", 1)
    rows = full_day.execute("SELECT quantity, estimate FROM fct_sensitivity_daily WHERE day = ? ORDER BY quantity, scope",
                            [DAY]).fetchall()
    sentences = re.findall(r"<li>(.*?)</li>", plain)
    assert len(sentences) == len(rows)
    for sentence, (quantity, estimate) in zip(sentences, rows):
        assert "_" not in sentence and "ols" not in sentence  # words, not column names or method codes
        if quantity == "energy_elasticity_to_utilization":
            assert sentence.startswith(f"10% more GPU activity goes with {10 * abs(estimate):.1f}%")
    assert "ols" not in plain and "elasticity" not in plain.lower()
    assert "least squares" in fold and "95% CI low" in fold and 'id="fig-' in fold  # statistics and forest plot, folded


def test_people_read_energy_money_and_carbon_without_float_noise():
    from joulehouse.reports.page.blocks import fmt_kg, fmt_kwh, fmt_usd

    assert fmt_usd(3.47e-05) == "under 0.01 USD" and fmt_usd(17.404) == "17.40 USD" and fmt_usd(943.31) == "943 USD"
    assert fmt_kwh(0.0011) == "1.1 Wh" and fmt_kwh(251.43) == "251.4 kWh" and fmt_kwh(2350.0) == "2.35 MWh"
    assert fmt_kwh(0.00004) == "0.04 Wh"
    assert fmt_kg(28_600.0) == "28.6 kgCO2e" and fmt_kg(0.4) == "0.4 gCO2e" and fmt_kg(1.2e6) == "1.20 tCO2e"
    # each step by the value as printed: these read '1e+02 gCO2e', '1,000.0 kgCO2e', '1,000.0 Wh', '1,000.0 kWh'
    assert (fmt_kg(99.96), fmt_kg(99.5), fmt_kg(999_960.0)) == ("0.1 kgCO2e", "99.5 gCO2e", "1.00 tCO2e")
    assert (fmt_kwh(0.99996), fmt_kwh(999.96), fmt_kwh(0.0)) == ("1.0 kWh", "1.00 MWh", "0.0 kWh")


def test_the_few_hours_power_sentence_says_the_models_gpus_together_and_each():
    """'GPU model not reported 587 W' read as one GPU's draw; it was 8 idle GPUs at 73 W each."""
    import datetime as dt

    import polars as pl

    from joulehouse.reports.page.render import fleet_power_sentence

    hour = dt.datetime(2025, 9, 8, 14, tzinfo=dt.timezone.utc)
    energy = pl.DataFrame({"hour_at": [hour] * 9, "gpu_uuid": [f"GPU-{i}" for i in range(9)],
                           "gpu_model": ["GPU model not reported"] * 8 + ["NVIDIA H200"],
                           "avg_power_w": [73.4] * 8 + [120.0]})
    sentence = fleet_power_sentence(energy)
    assert "GPU model not reported 587 W (8 GPUs, 73 W each)" in sentence
    assert "NVIDIA H200 120 W (1 GPU)" in sentence


def test_a_sensitivity_and_its_interval_are_said_to_the_same_useful_precision():
    """A new user read '0.008 higher PUE (95% interval 0.01 to 0.01)'; and the network elasticity
    came out raw ('-1.112 d ln(energy) / d ln(occupancy)') beside sentences."""
    from joulehouse.reports.page.section_models import sensitivity_sentence

    pue = sensitivity_sentence(dict(quantity="pue_per_outdoor_c", estimate=0.008, ci_low=0.0061, ci_high=0.0099))
    assert pue == "1 °C warmer outdoor temperature goes with 0.0080 higher PUE (95% interval 0.0061 to 0.0099)."
    network = sensitivity_sentence(dict(quantity="energy_elasticity_to_network_bandwidth", estimate=-1.112,
                                        ci_low=-2.0, ci_high=0.3, scope="H100", unit="d ln(energy) / d ln(occupancy)"))
    assert network.startswith("10% more network link occupancy (H100) goes with 11.1% less GPU energy; too uncertain")


def test_an_outcome_pooled_over_one_gpu_says_so_in_words():
    import polars as pl

    from joulehouse.reports.page.figures_estimates import outcome_label

    rows = pl.DataFrame(dict(scope=["gpu_model", "gpu_model"], gpu_model=["H200", "H200"], n_treated_gpus=[1, 4],
                             power_limit_w_before=[700.0, 700.0], power_limit_w_after=[600.0, 600.0],
                             host=["n1", "n1"], gpu_uuid=["GPU-1", "GPU-2"]))
    assert rows.select(outcome_label(rows)).to_series().to_list() == [
        # not "(all 1 GPUs)"; nor "all": a pooled row counts the GPUs measured, and a setting that
        # three GPUs took with two measured read "(all 2 GPUs)"
        "H200: 700→600 W (1 GPU measured)", "H200: 700→600 W (4 GPUs measured)"]


def test_unknown_energy_and_cost_are_drawn_and_said_as_unknown_not_zero(tmp_path):
    """One GPU never measured, an H200 host unmeasured at 05:00, the energy cost unknown: the page
    drew a 0 kWh bar for the GPU and the H200 power at 0 kW, read "0.0 kWh None" in its energy by
    method and "energy is 0% of it" on the cost card; carbon unknown for every job showed "-" with
    no reason."""
    from report_fixtures import gpus

    from joulehouse.reports.page import figures

    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    build_day(con)
    build_context_and_shift(con)
    build_analysis(con)
    never = gpus()[0][1]
    con.execute("UPDATE fct_gpu_energy_hourly SET energy_kwh = NULL, avg_power_w = NULL, coverage_ratio = 0, "
                "energy_source = NULL WHERE gpu_uuid = ? OR (host = 'node-03' AND hour(hour_at) = 5)", [never])
    con.execute("ALTER TABLE rpt_tco_daily ADD COLUMN energy_cost_usd DOUBLE")
    energy = con.sql("SELECT * FROM fct_gpu_energy_hourly").pl()
    bars = figures.energy_by_gpu(energy)
    assert not any(never[:12] in x for trace in bars.data for x in trace.x)
    assert "1 GPUs without measured energy not drawn" in bars.layout.title.text
    power = next(t for t in figures.fleet_power_by_model(energy).data if t.name == "NVIDIA H200")
    assert power.y[5] is None and power.y[4] > 0
    con.execute("UPDATE rpt_carbon_daily SET total_gco2e = NULL")  # every job's carbon unknown: the cards say why
    text = html.unescape(re.sub(r"<[^>]+>", " ", render_report(con, DAY, tmp_path / "r.html").read_text()))
    assert "energy is 0%" not in text and "kWh None" not in text
    assert "no job's carbon could be computed" in text
    assert re.search(r"\d+ GPU-hours without measured energy", text)


@pytest.mark.slow
def test_a_nan_or_infinite_watt_value_is_shown_as_unknown_not_a_failed_report(full_day, tmp_path):
    """A strict cast of one NaN or infinite limit to an integer stopped the whole day's page."""
    build_analysis(full_day)
    full_day.execute("UPDATE fct_recommendation_outcome SET power_limit_w_before = 'NaN'::DOUBLE")
    full_day.execute("UPDATE fct_recommendation SET default_limit_w = 'inf'::DOUBLE "
                     "WHERE gpu_uuid = (SELECT min(gpu_uuid) FROM fct_recommendation)")
    text = html.unescape(render_report(full_day, DAY, tmp_path / "r.html").read_text())
    model, before, after, *_ = OUTCOME_POOLED
    assert f"{model}: -→{after:.0f} W" in text


def _traces(text: str, title: str) -> list[dict]:
    """The traces of the figure whose title is `title`."""
    import json

    start = text.rindex("Plotly.newPlot", 0, text.index(f'"text":"{title}'))
    data, _ = json.JSONDecoder().raw_decode(text, text.index("[", start))
    return data


def _analysed_day() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    build_day(con)
    build_analysis(con)
    build_context_and_shift(con)
    return con


def test_the_bmc_figure_sets_a_server_against_its_gpus_over_the_same_hours(tmp_path):
    """The GPUs were summed over every hour and the server over the hours the BMC was read: a server
    read 12 h of 24 drew 48 kWh against its GPUs' 72; a host the BMC never answered for drew 0
    kWh (review, helper-90)."""
    con = _analysed_day()
    con.execute("UPDATE fct_node_reconciliation_hourly SET node_energy_kwh = NULL WHERE host = 'node-01' "
                "AND hour(hour_at) >= 12")
    start = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.timezone.utc)
    con.executemany("INSERT INTO fct_node_reconciliation_hourly (hour_at, day, host, gpu_energy_kwh) VALUES (?,?,?,?)",
                    [(start + dt.timedelta(hours=h), DAY, "node-03", 3.0) for h in range(24)])
    want = dict(con.execute("SELECT host, sum(gpu_energy_kwh) FROM fct_node_reconciliation_hourly "
                            "WHERE node_energy_kwh IS NOT NULL GROUP BY host").fetchall())
    page = render_report(con, DAY, tmp_path / "r.html").read_text()
    bars = {t["name"]: dict(zip(t["x"], t["y"])) for t in _traces(page, "Server (BMC) energy vs its GPUs")}
    assert bars["GPUs"] == pytest.approx(want) and "node-03" not in bars["server (BMC)"]
    assert "No BMC readings for node-03" in page


def test_a_shifting_plan_not_made_is_no_saving_of_zero(tmp_path):
    con = _analysed_day()
    con.execute("UPDATE rpt_shift_opportunity_daily SET carbon_saving_gco2e = NULL WHERE team = 'search'")
    page = render_report(con, DAY, tmp_path / "r.html").read_text()
    [carbon, _] = _traces(page, "What shifting deferrable jobs to the best hours would have saved")
    assert dict(zip(carbon["x"], carbon["y"]))["search"] is None
    assert "carbon plan not computed: the sums are of the rest" in html.unescape(page)


def test_the_fleet_power_sentence_leaves_out_unmeasured_hours_not_counts_them_as_zero(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE fct_gpu_energy_hourly (hour_at TIMESTAMPTZ, day DATE, host VARCHAR, gpu_uuid VARCHAR, "
                "gpu_model VARCHAR, energy_kwh DOUBLE, avg_power_w DOUBLE, coverage_ratio DOUBLE, energy_source VARCHAR)")
    start = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.timezone.utc)
    con.executemany("INSERT INTO fct_gpu_energy_hourly VALUES (?,?,'node-01','GPU-1','NVIDIA H200',?,?,?,?)",
                    [(start, DAY, None, None, 0.0, None), (start + dt.timedelta(hours=1), DAY, 0.0004, 0.4, 1.0, "counter")])
    page = html.unescape(render_report(con, DAY, tmp_path / "r.html").read_text())
    assert "NVIDIA H200 0 W (1 GPU)" not in page and re.search(r"NVIDIA H200 0\.4\d* W|NVIDIA H200 0 W", page)


def test_names_from_the_lake_cannot_turn_a_sentence_around_or_draw_links_in_a_figure(tmp_path):
    """A model named with U+202E read '3.0 kWh' as '0.3'; a host named with <a href> drew a working
    link inside a figure, which plotly.js reads as HTML (review, helper-90)."""
    con = _analysed_day()
    con.execute("UPDATE fct_gpu_energy_hourly SET gpu_model = gpu_model || ' \u202e' WHERE gpu_model LIKE '%H100%'")
    con.execute("UPDATE fct_node_reconciliation_hourly SET host = "
                "'n<a href=\"https://evil.example\">x</a>' WHERE host = 'node-01'")
    page = render_report(con, DAY, tmp_path / "r.html").read_text()
    assert "\u202e" not in page
    bars = _traces(page, "Server (BMC) energy vs its GPUs")
    hosts = [x for t in bars for x in t["x"]]
    assert 'n&lt;a href="https://evil.example">x&lt;/a>' in hosts and not any("<a" in h for h in hosts)


def test_warning_checks_that_did_not_run_are_not_called_passed(full_day, tmp_path):
    """Great Expectations failing in its own task stored no warning rows, and the page read
    'blocking: 17 of 17 passed ... Every check passed' (review, helper-93)."""
    full_day.execute("DELETE FROM fct_check_results WHERE severity = 'warning'")
    page = html.unescape(render_report(full_day, DAY, tmp_path / "r.html").read_text())
    assert "warning: did not run (no results stored for the day)" in page
    assert "Every check passed" not in page
