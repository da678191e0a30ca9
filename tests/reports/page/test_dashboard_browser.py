"""The carbon dashboard in headless Chromium, as the report is tested: every figure drawn, no
console errors, and the market-based traces show in place of the location-based ones."""

from __future__ import annotations

import base64
import json
import time

import duckdb
import pytest
from dashboard_world import build
from test_report_browser import COUNT_MARKS, SCREENSHOT_DIR, chromium, open_page  # noqa: F401 (chromium: a fixture)

from joulehouse.reports.dashboard.render import render_dashboard

FIRST_FIGURE_TITLE = ("document.querySelector('#fig-01 .g-ytitle').textContent")
SHOW_MARKET = """(() => { const fig = document.getElementById('fig-01');
  return Plotly.restyle(fig, {visible: fig.data.map((t, i) => i >= 3 && i < 6)})
    .then(() => Plotly.relayout(fig, {'yaxis.title.text': 'operational carbon, market-based (kgCO2e)'})).then(() => 'ok'); })()"""


@pytest.mark.integration
def test_dashboard_opens_in_chromium_with_every_figure_drawn(chromium, tmp_path):
    con = duckdb.connect()
    build(con)
    page = render_dashboard(con, tmp_path / "dashboard.html")
    tools = open_page(chromium, page.as_uri())
    figures = []
    for _ in range(50):
        figures = json.loads(tools.call("Runtime.evaluate", expression=COUNT_MARKS, returnByValue=True)["result"]["value"])
        if figures and all(f["svgs"] and f["marks"] for f in figures):
            break
        time.sleep(0.1)
    assert len(figures) == 9
    assert not [f for f in figures if not (f["svgs"] and f["marks"])]
    title = tools.call("Runtime.evaluate", expression=FIRST_FIGURE_TITLE, returnByValue=True)["result"]["value"]
    assert title == "operational carbon, location-based (kgCO2e)"
    done = tools.call("Runtime.evaluate", expression=SHOW_MARKET, awaitPromise=True, returnByValue=True)["result"]["value"]
    assert done == "ok"
    title = tools.call("Runtime.evaluate", expression=FIRST_FIGURE_TITLE, returnByValue=True)["result"]["value"]
    assert title == "operational carbon, market-based (kgCO2e)"
    assert tools.errors() == []
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    shot = tools.call("Page.captureScreenshot", format="png")
    (SCREENSHOT_DIR / "dashboard-top.png").write_bytes(base64.b64decode(shot["data"]))
    tools.ws.close()
