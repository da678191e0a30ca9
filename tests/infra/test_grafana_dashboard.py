"""infra/grafana/joulehouse-fleet.json: import-ready, and every metric it queries is one the
project exports or dcgm-exporter publishes with the project's counters file (and Prometheus
keeps)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from joulehouse.collectors.metrics import METRIC_NAMES as NODE_METRICS
from joulehouse.reports.export.headline_metrics import METRIC_NAMES as DAILY_METRICS

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "infra" / "grafana" / "joulehouse-fleet.json"
COUNTERS = REPO / "infra" / "dcgm-exporter" / "counters.csv"
PROMETHEUS_YML = REPO / "infra" / "prometheus" / "prometheus.yml"
# Series Prometheus makes itself for every target.
PROMETHEUS_OWN = {"up"}
PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
                "offset", "inf", "nan"}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def queries(board: dict) -> list[str]:
    found = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    found += [v["definition"] for v in board["templating"]["list"] if v["type"] == "query"]
    return found


def metric_names(expr: str) -> set[str]:
    """The series names a PromQL expression selects: identifiers that are not functions (followed
    by '('), keywords, label names inside {...} or by/without (...), durations, strings or numbers."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery durations
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    text = re.sub(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*[A-Za-z_]+\s*\)", r"\1", text)
    names = set()
    for match in re.finditer(r"(?<![A-Za-z0-9_:.$])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?", text):
        name, call = match.group(1), match.group(2)
        if call or name.lower() in PROMQL_WORDS:
            continue
        names.add(name)
    return names


def dcgm_published() -> set[str]:
    lines = [line.split(",")[0].strip() for line in COUNTERS.read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    return set(lines)


def test_metric_names_are_read_out_of_promql():
    assert metric_names('sum by (Hostname) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{namespace!=""}[5m])) / 1000') == {
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}
    assert metric_names("time() - joulehouse_ship_last_success_timestamp_seconds{instance=~\"$instance\"}") == {
        "joulehouse_ship_last_success_timestamp_seconds"}
    assert metric_names("label_values(up, instance)") == {"up"}
    assert metric_names("a_total - on (x) group_left b") == {"a_total", "b"}


def test_every_metric_queried_is_exported_by_someone():
    exported = NODE_METRICS | DAILY_METRICS | dcgm_published() | PROMETHEUS_OWN
    used = set().union(*(metric_names(q) for q in queries(dashboard())))
    assert used, "the dashboard queries nothing"
    assert used - exported == set()
    # Each source of metrics has its panels.
    assert used & NODE_METRICS and used & DAILY_METRICS and used & dcgm_published()


def test_the_dcgm_fields_it_shows_are_kept_by_the_scrape_config():
    keep = re.search(r'regex: "([^"]+)"\s*\n\s*action: keep', PROMETHEUS_YML.read_text()).group(1)
    used = {name for q in queries(dashboard()) for name in metric_names(q) if name.startswith("DCGM_")}
    assert {name for name in used if not re.fullmatch(keep, name)} == set()


def test_it_is_import_ready():
    board = dashboard()
    assert board["uid"] and board["title"] and board["schemaVersion"] >= 36
    variables = {v["name"] for v in board["templating"]["list"]}
    assert "datasource" in variables
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in board["panels"]:
        assert {"h", "w", "x", "y"} <= set(panel["gridPos"]) and panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
    variable_refs = set(re.findall(r"\$(\w+)", json.dumps(board["panels"])))
    assert variable_refs <= variables


@pytest.mark.parametrize("name", sorted(NODE_METRICS | DAILY_METRICS))
def test_each_exported_metric_carries_its_unit_or_kind(name):
    assert name.startswith("joulehouse_")
    assert re.search(r"_(total|seconds|rows|segments|files|kwh|gco2e|usd|ratio|failed|shipped|in_force|gpus|checks|exported)$",
                     name), name
