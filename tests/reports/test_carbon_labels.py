"""One label, one number: the daily report's carbon cards and the dashboard's show the same totals
for the same day (operational + embodied, its parts named), and the terminal's headline and the
exported metric say the same of the same figure. Before, the dashboard's "carbon, location-based"
was operational only and the report's the same label with embodied carbon added."""

from __future__ import annotations

import html
import re

import pytest
from rich.console import Console

from accounting_world import DAY, build_world
from joulehouse.cli.headline import HEADLINE_SQL, headline_table
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.reports.dashboard.render import render_dashboard
from joulehouse.reports.export.headline_metrics import HEADLINE, day_headline
from joulehouse.reports.page.blocks import fmt_kg
from joulehouse.reports.page.render import render_report
from joulehouse.settings import CarbonSettings, TcoSettings

CARD = re.compile(r'<div class="card"><div class="k">(.*?)</div><div class="v">(.*?)</div>(?:<ul class="parts">(.*?)</ul>)?')
PART = re.compile(r"<li>(.*?) <b>(.*?)</b></li>")


def cards(text: str) -> dict[str, tuple[str, dict[str, str]]]:
    """{label: (value, {part: amount})} of a page's cards."""
    return {html.unescape(k): (html.unescape(v), {html.unescape(n): html.unescape(a) for n, a in PART.findall(p or "")})
            for k, v, p in CARD.findall(text)}


@pytest.fixture()
def accounted(shared_data):
    con = build_world()
    carbon_day(con, DAY, CarbonSettings(residual_mix_from="setting", residual_mix_gco2e_per_kwh=400.0), shared_data)
    tco_day(con, DAY, TcoSettings(), shared_data)
    return con


def test_the_report_and_the_dashboard_show_the_same_carbon_for_the_same_day(accounted, tmp_path):
    report = cards(render_report(accounted, DAY, tmp_path / f"{DAY}.html").read_text())
    dashboard = cards(render_dashboard(accounted, tmp_path / "dashboard.html").read_text())
    location, market, embodied, operational = accounted.execute(
        "SELECT sum(total_gco2e), sum(total_market_gco2e), sum(embodied_gco2e), sum(location_gco2e) "
        "FROM rpt_carbon_daily").fetchone()
    assert embodied > 0 and operational > 0
    for label, total in (("carbon, location-based (operational + embodied)", location),
                         ("carbon, market-based (operational + embodied)", market)):
        assert report[label][0] == dashboard[label][0] == fmt_kg(total), label
        assert report[label][1] == dashboard[label][1], label
    parts = report["carbon, location-based (operational + embodied)"][1]
    assert parts == {"operational, location-based (grid)": fmt_kg(operational), "embodied (manufacturing)": fmt_kg(embodied)}
    # no card anywhere is labelled with a bare "carbon, location-based" any more
    assert not [k for k in [*report, *dashboard] if k in ("carbon, location-based", "carbon, market-based")]


def test_the_terminal_and_the_metric_name_the_same_total(accounted):
    numbers = {name: accounted.execute(sql, [DAY]).fetchone()[0] for name, sql in HEADLINE_SQL.items()
               if "rpt_carbon_daily" in sql or "rpt_tco_daily" in sql or "fct_gpu_energy_hourly" in sql}
    numbers |= {k: None for k in HEADLINE_SQL if k not in numbers}
    console = Console(width=200, record=True)
    console.print(headline_table(DAY, numbers, "t"))
    text = console.export_text()
    location = accounted.execute("SELECT sum(total_gco2e) / 1000 FROM rpt_carbon_daily").fetchone()[0]
    assert re.search(rf"carbon, location-based \(operational \+ embodied\)[\s│]+{location:,.1f} kgCO2e", text), text
    assert "of which embodied (manufacturing)" in text
    metric = "joulehouse_daily_carbon_gco2e"
    assert HEADLINE[metric][0].startswith("Carbon, location-based (operational + embodied)")
    assert day_headline(accounted, DAY)[metric] == pytest.approx(location * 1000)
