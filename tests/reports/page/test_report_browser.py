"""The report in a real browser: Debian's headless Chromium, driven over the DevTools protocol.

Checks what a person would see at 1280 px: no console errors or uncaught exceptions, every figure
drawn (plotly's SVG with marks in it), nothing wider than the viewport or its card (folds opened),
one colour per GPU model in every figure, and a screenshot saved for a human to look at.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

import duckdb
import pytest

from report_fixtures import DAY, build_analysis, build_context_and_shift, build_day, energy_vs_limit
from joulehouse.reports.page.render import render_report

import websockets.sync.client as websockets_sync

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--remote-debugging-port=0",
         "--window-size=1280,900"]
SCREENSHOT_DIR = Path(__file__).resolve().parents[3] / "var" / "screenshots"

COUNT_MARKS = """
JSON.stringify(Array.from(document.querySelectorAll('div[id^="fig-"]')).map(d => ({
  id: d.id,
  svgs: d.querySelectorAll('.main-svg').length,
  marks: d.querySelectorAll('.plot path, .plot .point, .bars path, .scatterlayer path').length,
})))
"""


# Every element (folds opened) that sticks out of its card or the viewport, at the page's width.
OVERFLOWING = """
JSON.stringify((() => {
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  const viewport = document.documentElement.clientWidth;
  const out = [];
  if (document.documentElement.scrollWidth > viewport) out.push({what: 'page', width: document.documentElement.scrollWidth});
  for (const section of document.querySelectorAll('section')) {
    const card = section.getBoundingClientRect();
    for (const el of section.querySelectorAll('*')) {
      if (el.closest('svg')) continue;  // plotly's own layers are clipped to its figure
      const r = el.getBoundingClientRect();
      if (r.width > 0 && (r.right > card.right + 1 || r.right > viewport)) {
        out.push({section: section.id, tag: el.tagName, cls: el.className, right: Math.round(r.right),
                  card: Math.round(card.right), text: (el.innerText || '').slice(0, 60)});
      }
    }
  }
  return out.slice(0, 10);
})())
"""
TRACE_COLOURS = """
JSON.stringify(Array.from(document.querySelectorAll('.js-plotly-plot')).flatMap(
  gd => gd.data.map(t => [gd.id, t.name || '', String((t.marker && t.marker.color) || '')])))
"""


class DevTools:
    """A minimal DevTools-protocol session on one page target."""

    def __init__(self, ws_url: str):
        self.ws = websockets_sync.connect(ws_url, max_size=64 * 2**20, open_timeout=20)
        self.ids = itertools.count(1)
        self.events: list[dict] = []

    def call(self, method: str, timeout_s: float = 30.0, **params) -> dict:
        call_id = next(self.ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, method: str, timeout_s: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout_s
        for event in self.events:
            if event.get("method") == method:
                return event
        while time.monotonic() < deadline:
            message = json.loads(self.ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            self.events.append(message)
            if message.get("method") == method:
                return message
        raise TimeoutError(f"no {method} within {timeout_s} s")

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            p = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif e.get("method") == "Runtime.exceptionThrown":
                out.append("exception: " + p["exceptionDetails"].get("text", "") + " " +
                           str(p["exceptionDetails"].get("exception", {}).get("description", "")))
            elif e.get("method") == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} ({p['entry'].get('url', '')})")
        return out


@pytest.fixture()
def chromium(tmp_path):
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is not installed (make test installs it)")
    profile = tmp_path / "profile"
    proc = subprocess.Popen([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"chromium did not start (exit {proc.poll()})")
        time.sleep(0.1)
    port = int(port_file.read_text().splitlines()[0])
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def open_page(port: int, url: str) -> DevTools:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(request, timeout=10) as response:
        target = json.loads(response.read())
    tools = DevTools(target["webSocketDebuggerUrl"])
    for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
        tools.call(domain)
    tools.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
    tools.call("Page.navigate", url=url)
    tools.wait_for("Page.loadEventFired", timeout_s=60)
    return tools


@pytest.mark.integration
def test_report_opens_in_chromium_with_every_figure_drawn(chromium, tmp_path):
    con = duckdb.connect()
    build_day(con)
    build_context_and_shift(con)  # the context and shifting figures drawn from their relations
    build_analysis(con)  # sensitivities, job prediction, efficiency, outcome, coverage, reconciliation, PUE
    report = render_report(con, DAY, tmp_path / f"{DAY}.html", notes={"energy_vs_limit": energy_vs_limit()})
    tools = open_page(chromium, report.as_uri())
    figures = []
    for _ in range(50):  # plotly draws synchronously on load; allow the layout a moment
        figures = json.loads(tools.call("Runtime.evaluate", expression=COUNT_MARKS, returnByValue=True)["result"]["value"])
        if figures and all(f["svgs"] and f["marks"] for f in figures):
            break
        time.sleep(0.1)
    # recommendations 1 (outcome), energy 4 (with BMC vs GPUs), efficiency 1, power models 6 (fit, residuals,
    # curve, thermal, sensitivities, job prediction), carbon and cost 5, data quality 4 (quarantine, coverage,
    # reconciliation, PUE)
    assert len(figures) == 21
    undrawn = [f for f in figures if not (f["svgs"] and f["marks"])]
    assert not undrawn, f"figures with no plot marks: {undrawn}"
    assert tools.errors() == []

    colours: dict[str, set[str]] = {}
    for _, name, colour in json.loads(tools.call("Runtime.evaluate", expression=TRACE_COLOURS,
                                                 returnByValue=True)["result"]["value"]):
        if name.startswith("NVIDIA "):
            colours.setdefault(name, set()).add(colour)
    assert len(colours) >= 3 and all(len(c) == 1 for c in colours.values()), colours  # one colour per GPU model...
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)  # ...and a different one for each

    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    top = tools.call("Page.captureScreenshot", format="png")
    (SCREENSHOT_DIR / "report-top.png").write_bytes(base64.b64decode(top["data"]))
    height = tools.call("Runtime.evaluate", expression="document.documentElement.scrollHeight",
                        returnByValue=True)["result"]["value"]
    full = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                      clip={"x": 0, "y": 0, "width": 1280, "height": height, "scale": 0.5})
    shot = SCREENSHOT_DIR / "report-full.png"
    shot.write_bytes(base64.b64decode(full["data"]))
    assert shot.stat().st_size > 50_000  # a page of charts, not a blank image

    overflowing = json.loads(tools.call("Runtime.evaluate", expression=OVERFLOWING, returnByValue=True)["result"]["value"])
    assert overflowing == [], overflowing
    tools.ws.close()


@pytest.mark.integration
def test_a_report_with_nothing_to_show_still_loads_cleanly(chromium, tmp_path):
    report = render_report(duckdb.connect(), DAY, tmp_path / "empty.html")
    tools = open_page(chromium, report.as_uri())
    text = tools.call("Runtime.evaluate", expression="document.body.innerText", returnByValue=True)["result"]["value"]
    assert "Not computed: no GPU energy" in text
    assert "Not computed (" in text  # the summary gathers every gap
    assert tools.errors() == []
    tools.ws.close()
