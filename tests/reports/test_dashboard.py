"""The carbon dashboard over every day held, on a hand-written 40-day warehouse: sums per month and
week by team, GPU model and site follow the rows, a job follows its energy onto its GPU models."""

from __future__ import annotations

import datetime as dt
import html
import re

import duckdb
import pytest
from dashboard_world import A100, H100, RTX, START, build
from plotly.offline import get_plotlyjs

from joulehouse.reports.dashboard.render import (METRICS, SPLIT_STAND_INS, SQL, STAND_INS, by_dimension_figure,
                                              render_dashboard)
from joulehouse.reports.page.blocks import plotly_file_name


@pytest.fixture()
def world():
    con = duckdb.connect()
    build(con)
    yield con
    con.close()


def by(con, period: str) -> dict:
    for name, query in SPLIT_STAND_INS.items():  # as the page does: this world was accounted before they were kept
        con.execute(f"CREATE TEMP VIEW IF NOT EXISTS {name} AS {query}")
    rows = con.sql(SQL.text("dashboard_carbon_cost"), params={"period": period}).fetchall()
    return {(r[0], r[1], r[2]): r[3:] for r in rows}


def test_month_sums_follow_team_model_and_site(world):
    month = by(world, "month")
    may, june = dt.date(2026, 5, 1), dt.date(2026, 6, 1)
    may_days = 12  # 20..31 May
    assert month[(may, "team", "nlp")][:4] == pytest.approx((1000.0 * may_days, 400.0 * may_days, 100.0 * may_days,
                                                            10.0 * may_days))
    # vision: a quarter of its energy on the A100, three quarters on the H100 (site-b)
    # the idle line (300 g a day) follows the idle GPU energy: 0.6 of 1.0 kWh on the A100, 0.2 on the
    # H100, 0.2 on a GPU outside the inventory
    assert month[(june, "gpu_model", H100)][0] == pytest.approx((0.75 * 2000.0 + 0.2 * 300.0) * 28)
    assert month[(june, "gpu_model", A100)][0] == pytest.approx((1000.0 + 0.25 * 2000.0 + 0.6 * 300.0) * 28)
    assert month[(june, "gpu_model", RTX)][0] == pytest.approx(0.2 * 300.0 * 28)
    assert month[(june, "site", "site-b")][3] == pytest.approx((0.75 * 20.0 + 0.2 * 3.0) * 28)
    assert month[(june, "site", "not in inventory")][0] == pytest.approx(0.2 * 300.0 * 28)
    assert month[(june, "team", "unallocated")][0] == pytest.approx(300.0 * 28)
    assert not [k for k in month if k[1] != "team" and k[2] == "unallocated"], "a model or site named 'unallocated'"
    for dimension in ("team", "gpu_model", "site"):  # every dimension adds up to the same total
        assert sum(v[0] for k, v in month.items() if k[1] == dimension) == pytest.approx(3300.0 * 40)


def test_without_gpu_energy_the_idle_line_stays_unallocated(world):
    world.execute("DROP TABLE fct_gpu_energy_hourly")
    world.execute(f"CREATE TEMP VIEW fct_gpu_energy_hourly AS {STAND_INS['fct_gpu_energy_hourly']}")  # as the page does
    month = by(world, "month")
    assert month[(dt.date(2026, 6, 1), "site", "unallocated")][0] == pytest.approx(300.0 * 28)


def test_weeks_start_on_monday(world):
    weeks = {k[0] for k in by(world, "week")}
    assert all(w.weekday() == 0 for w in weeks) and min(weeks) == dt.date(2026, 5, 18)


def test_the_page_loads_the_shared_plotly_and_draws_every_part(world, tmp_path):
    text = render_dashboard(world, tmp_path / "dashboard.html").read_text()
    # the one copy beside the daily reports, not 4.6 MB more in the page
    assert get_plotlyjs()[:300] not in text
    assert re.findall(r'<script[^>]*src="([^"]*)"', text) == [plotly_file_name()]
    assert (tmp_path / plotly_file_name()).read_text() == get_plotlyjs()
    plain = html.unescape(text)
    for title in ("Carbon and cost by team, per week", "Carbon and cost by GPU model, per month",
                  "Carbon and cost by site, per week", "Energy per unit of work over time",
                  "Fleet FLOPs per watt against the 20% gain goal", "Realised savings of the applied settings over time"):
        assert f'"text":"{title}"' in plain, title
    assert "operational carbon, market-based (kgCO2e)" in plain and "embodied carbon (kgCO2e)" in plain
    assert f"{START} to {START + dt.timedelta(days=39)}" in plain
    assert "Not computed" not in plain
    assert len(re.findall(r'id="fig-\d\d"', text)) == 9
    # The headline cards are markup, not escaped text ("&lt;div class=...").
    assert text.count('class="card"') >= 4 and "&lt;div" not in text and "&lt;p" not in text


def test_a_warehouse_without_costs_or_jobs_still_draws_and_says_so(tmp_path):
    con = duckdb.connect()
    build(con)
    for name in ("rpt_tco_daily", "fct_job_efficiency", "fct_flops_per_watt_daily", "fct_recommendation_outcome"):
        con.execute(f"DROP TABLE {name}")
    plain = html.unescape(render_dashboard(con, tmp_path / "d.html").read_text())
    assert "rpt_tco_daily is not in the warehouse" in plain
    assert "no setting has taken effect and been measured yet" in plain
    # the total cost is unknown, not 0.00 USD, and so is every period's
    assert ('<div class="k">total cost</div><div class="v">-</div>'
            '<div class="s">40 day(s) without cost accounts: not computed</div>') in plain


def test_no_carbon_accounts_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="no carbon accounts"):
        render_dashboard(duckdb.connect(), tmp_path / "d.html")


def test_a_day_without_a_market_figure_leaves_its_periods_market_carbon_a_gap_not_a_smaller_sum(world, tmp_path):
    """The accounts leave a day's market_gco2e NULL when some energy had neither a contract nor a
    residual mix: the week and month holding it have no market-based figure (summed, the day read as 0)."""
    gap = dt.date(2026, 6, 10)
    world.execute("UPDATE rpt_carbon_daily SET market_gco2e = NULL WHERE day = ?", [gap])
    month, week = by(world, "month"), by(world, "week")
    june, may = dt.date(2026, 6, 1), dt.date(2026, 5, 1)
    gap_week = gap - dt.timedelta(days=gap.weekday())
    # summed over the other 27 days, June's read 10.8 kg for nlp, as if the whole month's
    assert month[(june, "team", "nlp")][1] is None and week[(gap_week, "team", "nlp")][1] is None
    for key, row, holds_gap in [*((k, r, k[0] == june) for k, r in month.items()),
                                *((k, r, k[0] == gap_week) for k, r in week.items())]:
        # (location, market, embodied, cost, energy, days, market_missing_days)
        assert (row[1] is None) == holds_gap, key
        assert row[6] == (1 if holds_gap else 0), key
        assert row[0] is not None, key  # location-based carbon is still there
    assert month[(june, "team", "nlp")][0] == pytest.approx(1000.0 * 28)
    assert month[(may, "team", "nlp")][1] == pytest.approx(400.0 * 12)
    # the bars draw the gap (no bar), never the other days' sum, and the page says why
    rows = world.sql(SQL.text("dashboard_carbon_cost"), params={"period": "month"}).pl()
    traces = by_dimension_figure(rows, "team", "team", "month").data
    market = [m for m, _, _ in METRICS].index("market_gco2e") * len(traces) // len(METRICS)
    nlp = next(tr for tr in traces[market:] if tr.name == "nlp")
    assert list(nlp.y) == [pytest.approx(0.4 * 12), None]
    plain = html.unescape(render_dashboard(world, tmp_path / "dashboard.html").read_text())
    assert "1 day(s) without a market-based figure" in plain and "show no market-based carbon" in plain


def test_a_job_without_measured_energy_misses_no_market_figure(world, tmp_path):
    """A job on a GPU that was not read has NULL energy and NULL carbon: it has no market figure to
    miss (as in rpt_carbon_monthly), yet it hid the dashboard's market-based total for its period."""
    day = dt.date(2026, 6, 10)
    world.execute("""INSERT INTO rpt_carbon_daily BY NAME
                     SELECT * REPLACE ('unread-job' AS job_id, NULL::DOUBLE AS energy_kwh, NULL::DOUBLE AS location_gco2e,
                                       NULL::DOUBLE AS market_gco2e)
                     FROM rpt_carbon_daily WHERE day = ? AND team = 'nlp' LIMIT 1""", [day])
    assert world.execute(SQL.text("dashboard_market_missing_days")).fetchone() == (0,)
    june = by(world, "month")[(dt.date(2026, 6, 1), "team", "nlp")]
    assert june[1] is not None and june[6] == 0
    plain = html.unescape(render_dashboard(world, tmp_path / "dashboard.html").read_text())
    assert "without a market-based figure" not in plain


def test_days_without_cost_accounts_leave_the_total_and_their_periods_cost_unknown(world, tmp_path):
    """10 of 40 days without rpt_tco_daily rows: the card read 990 USD where 1,320 is the whole,
    and nothing said days were missing."""
    world.execute("DELETE FROM rpt_tco_daily WHERE day >= ?", [dt.date(2026, 6, 19)])
    month = by(world, "month")
    may, june = dt.date(2026, 5, 1), dt.date(2026, 6, 1)
    # (location, market, embodied, cost, energy, days, market_missing_days, cost_missing_days)
    assert month[(june, "team", "nlp")][3] is None and month[(june, "team", "nlp")][7] == 10
    assert month[(may, "team", "nlp")][3] == pytest.approx(10.0 * 12) and month[(may, "team", "nlp")][7] == 0
    plain = html.unescape(render_dashboard(world, tmp_path / "d.html").read_text())
    assert ('<div class="k">total cost</div><div class="v">-</div>'
            '<div class="s">10 day(s) without cost accounts: not computed</div>') in plain


def test_embodied_carbon_unknown_is_not_shown_as_zero(world, tmp_path):
    world.execute("UPDATE rpt_carbon_daily SET embodied_gco2e = NULL")
    plain = html.unescape(render_dashboard(world, tmp_path / "d.html").read_text())
    assert "embodied (manufacturing)" not in plain.split("days held")[0]  # no 0.0 kgCO2e part on the cards
