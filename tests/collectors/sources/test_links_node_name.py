"""A node's own links collector against a real Prometheus, where node_exporter's uname names the
node otherwise than the collector's host: an FQDN where the collector was given `--host node-01`,
upper case where the lake's host is lowercase (collectors/sources/host_names.py). It picked its
ports by node_uname_info{nodename="<host>"} and read none of them."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, scraped, wait_for

pytestmark = [pytest.mark.integration]
if not Path(PROMETHEUS).exists():
    pytest.skip(f"{PROMETHEUS} is not installed (Debian package 'prometheus')", allow_module_level=True)

# uname's nodename -> the instance Prometheus scrapes its node_exporter as
NODES = {"node-01.cluster.example.com": "10.0.0.5:9100", "GPU-NODE-02": "10.0.0.6:9100", "node-010": "10.0.0.7:9100"}
TX_BYTES_PER_S = 3.0e9
T0 = time.time()


def node_text(nodename: str) -> str:
    port = 'device="mlx5_0",port="1"'
    return "\n".join([
        "# TYPE node_infiniband_port_data_transmitted_bytes_total counter",
        f"node_infiniband_port_data_transmitted_bytes_total{{{port}}} {1e12 + TX_BYTES_PER_S * (time.time() - T0):.9e}",
        "# TYPE node_infiniband_rate_bytes_per_second gauge",
        f"node_infiniband_rate_bytes_per_second{{{port}}} 25000000000",
        "# TYPE node_uname_info gauge",
        f'node_uname_info{{machine="x86_64",nodename="{nodename}",release="6.1.0-18-amd64",sysname="Linux"}} 1',
    ]) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    endpoints = {name: TextEndpoint(lambda name=name: node_text(name)) for name in NODES}
    dcgm = TextEndpoint(lambda: "")
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-node-names"), dcgm.port,
                              node_targets={e.port: NODES[name] for name, e in endpoints.items()})
    with scraped(server, lambda: server.series_count("count(node_uname_info)") == len(NODES),
                 "max(timestamp(node_infiniband_rate_bytes_per_second))", [dcgm, *endpoints.values()]):
        yield server


@pytest.mark.parametrize("collector_host, lake_host", [
    ("node-01", "node-01"),  # --host node-01 where uname says node-01.cluster.example.com
    ("GPU-NODE-02", "gpu-node-02"),  # gethostname() is uname's GPU-NODE-02: the lake's host is lowercase
])
def test_a_nodes_own_collector_reads_its_ports_under_its_lake_host(prometheus, tmp_path, collector_host, lake_host):
    from joulehouse.cli.collect import _build_sources
    from joulehouse.collectors.settings import CollectorSettings

    settings = CollectorSettings(prometheus_url=prometheus.url, prometheus_step_s=1,
                                 dcgm_state_path=str(tmp_path / "dcgm.json"))
    start = prometheus.first_scrape_s + 6
    wait_for(lambda: time.time() > start + 3, 15, "a rate window of scrapes")
    [scheduled] = _build_sources(["links"], collector_host, tmp_path / "lake", settings, 0, CollectorSettings())
    ports = [r for r in scheduled.source.read_range(start, start + 2).to_pylist() if r["link_kind"] == "infiniband"]
    # before: node-01 read 0 port rows (nodename="node-01" matches no FQDN), node-02 wrote GPU-NODE-02
    # node-010 begins as node-01 does: the name is matched whole (its port would give 3 rows more)
    assert len(ports) == 3 and {r["host"] for r in ports} == {lake_host}, sorted({r["host"] for r in ports})
