"""The node metrics scraped by the real Prometheus: `joulehouse collect --metrics-port` (a real
collector process), an agent's /metrics, and ship's textfile served by the real node_exporter;
then every query of the Grafana dashboard runs on that Prometheus."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
import requests
from prometheus_client import CollectorRegistry
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.agent_loop import AgentState
from joulehouse.collectors.metrics import AgentStateMetrics, MetricsExposure
from joulehouse.collectors.writer import write_dataset
from prometheus_server import PROMETHEUS, PrometheusServer, free_port, wait_for

pytestmark = [pytest.mark.integration]
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "infra" / "grafana" / "joulehouse-fleet.json"
for binary in (PROMETHEUS, NODE_EXPORTER):
    if not Path(binary).exists():
        pytest.skip(f"{binary} is not installed (Debian packages prometheus, prometheus-node-exporter)",
                    allow_module_level=True)


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """A collector process, an agent's metrics and a node_exporter textfile, all scraped."""
    root = tmp_path_factory.mktemp("metrics")
    collect_port, agent_port, node_port = free_port(), free_port(), free_port()
    collector = subprocess.Popen(
        [sys.executable, "-m", "joulehouse", "collect", "--source", "sim", "--sim-gpus", "2", "--host", "node-01",
         "--lake", str(root / "node" / "lake"), "--interval", "200ms", "--roll-interval", "1s",
         "--metrics-port", str(collect_port)],
        stdout=open(root / "collect.log", "wb"), stderr=subprocess.STDOUT)
    state = AgentState(gpu_actions={"apply": 3, "unchanged": 5}, config_refusals={"ExpiredConfig": 1}, polls=9,
                       in_force_sha256="ab" * 32, in_force_valid_from=dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2))
    registry = CollectorRegistry()
    registry.register(AgentStateMetrics(state))
    agent = MetricsExposure(registry, port=agent_port)
    textfiles = root / "textfile"
    node_lake = root / "shipper" / "lake"
    write_dataset(node_lake, "gpu_samples", pa.Table.from_pylist([
        {"sampled_at": dt.datetime.now(dt.timezone.utc), "host": "node-01", "gpu_index": 0, "gpu_uuid": "GPU-0",
         "power_w": 100.0, "source": "nvml"}]))
    shipped = CliRunner().invoke(app, ["ship", "--lake", str(node_lake), "--to", str(root / "central"),
                                       "--metrics-textfile", str(textfiles / "joulehouse_ship.prom")])
    assert shipped.exit_code == 0, shipped.output
    node_exporter = subprocess.Popen(
        [NODE_EXPORTER, "--collector.disable-defaults", "--collector.textfile",
         f"--collector.textfile.directory={textfiles}", f"--web.listen-address=127.0.0.1:{node_port}"],
        stdout=open(root / "node_exporter.log", "wb"), stderr=subprocess.STDOUT)
    prometheus = PrometheusServer(root / "prometheus", {"joulehouse-collect": [collect_port],
                                                        "joulehouse-agent": [agent_port],
                                                        "node-exporter": [node_port]})
    try:
        wait_for(lambda: prometheus.series_count('count(up == 1)') == 3, 40, "three targets up")
        yield prometheus
    finally:
        prometheus.stop()
        stop(node_exporter)
        agent.stop()
        stop(collector)


def value(prometheus: PrometheusServer, query: str) -> float | None:
    result = prometheus.query(query)
    return float(result[0]["value"][1]) if result else None


def test_prometheus_reads_back_what_the_collector_process_wrote(fleet):
    query = 'joulehouse_collector_readings_spooled_total{job="joulehouse-collect",source="sim",dataset="gpu_samples"}'
    wait_for(lambda: (value(fleet, query) or 0) > 0, 30, "the collector's readings in Prometheus")
    first = value(fleet, query)
    assert first % 2 == 0  # two GPUs a poll
    wait_for(lambda: value(fleet, query) > first, 30, "the count to grow with the polls")
    wait_for(lambda: value(fleet, "joulehouse_collector_last_lake_write_timestamp_seconds") is not None, 30,
             "a Parquet file rolled (every 1 s)")
    assert abs(value(fleet, "joulehouse_collector_last_lake_write_timestamp_seconds") - time.time()) < 60


def test_agent_and_ship_metrics_arrive_through_their_endpoints(fleet):
    wait_for(lambda: value(fleet, 'joulehouse_agent_gpu_actions_total{action="apply"}') == 3, 30, "the agent's applies")
    age = value(fleet, "joulehouse_agent_config_age_seconds")
    assert 7200 <= age < 7200 + 120
    wait_for(lambda: value(fleet, "joulehouse_ship_files_shipped") == 1, 30, "ship's textfile via node_exporter")
    assert value(fleet, "joulehouse_ship_pending_files") == 0


def dashboard_answers(fleet: PrometheusServer) -> dict[str, bool]:
    """Every panel's queries run on Prometheus (each must parse and evaluate); panel title ->
    whether any of its queries has data."""
    board = json.loads(DASHBOARD.read_text())
    answered: dict[str, bool] = {}
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            expr = target["expr"].replace("$instance", ".*").replace("$host", ".*")
            body = requests.get(f"{fleet.url}/api/v1/query", params={"query": expr}, timeout=5).json()
            assert body["status"] == "success", (panel["title"], expr, body.get("error"))
            answered[panel["title"]] = bool(body["data"]["result"]) or answered.get(panel["title"], False)
    return answered


def test_every_dashboard_query_runs_on_prometheus(fleet):
    # The panels over what these endpoints export get data (rates and increases need two
    # scrapes; DCGM and daily panels need their own sources).
    wanted = ("Spool backlog (rows in memory)", "Since the last Parquet file", "Readings spooled per source",
              "Files left to ship", "Config age", "Configs refused (1 d)", "GPU actions (1 d)")
    wait_for(lambda: all(dashboard_answers(fleet)[title] for title in wanted), 40,
             f"data in the panels {wanted}")
