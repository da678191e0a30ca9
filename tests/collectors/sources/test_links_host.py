"""The host of an InfiniBand port, against a real Prometheus. node_exporter's infiniband series carry
no host label; the node's name is in node_uname_info{nodename}. Scraped by IP (the usual target),
the ports landed under "10.0.0.5" while the node's GPUs landed under "node-01", so the warehouse's
per-host joins never met them; a node scraped under two instance labels gave its ports twice."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, scraped, wait_for

from joulehouse.collectors.sources.links import PrometheusLinkSource

pytestmark = [pytest.mark.integration]
if not Path(PROMETHEUS).exists():
    pytest.skip(f"{PROMETHEUS} is not installed (Debian package 'prometheus')", allow_module_level=True)

# node -> (tx bytes/s, rx bytes/s, port rate bytes/s) of its one port mlx5_0/1
PORT_RATES = {"node-01": (3.0e9, 1.5e9, 25e9), "node-02": (8.0e9, 12.0e9, 50e9), "node-03": (1.0e9, 2.0e9, 25e9),
              "node-04": (2.0e9, 4.0e9, 50e9)}
T0 = time.time()
# node-04 reboots into a new kernel: its node_uname_info changes its release label every 2 s.
NEW_KERNEL_EVERY_S = 2


def dcgm_text() -> str:
    return "".join(
        f'DCGM_FI_PROF_NVLINK_TX_BYTES{{gpu="0",UUID="GPU-{host}",modelName="NVIDIA H100 80GB HBM3",Hostname="{host}"}} 1e9\n'
        for host in ("node-01", "node-02"))


def node_text(node: str, *, uname: bool = True, release: str = "6.1.0-18-amd64") -> str:
    """node_exporter's exposition for one node: its port's counters and rate (no host label, as the
    infiniband collector writes them) and, unless `uname` is False, its uname collector's series."""
    tx, rx, rate = PORT_RATES[node]
    elapsed = time.time() - T0
    port = 'device="mlx5_0",port="1"'
    lines = [
        "# TYPE node_infiniband_port_data_transmitted_bytes_total counter",
        f"node_infiniband_port_data_transmitted_bytes_total{{{port}}} {1e12 + tx * elapsed:.6e}",
        "# TYPE node_infiniband_port_data_received_bytes_total counter",
        f"node_infiniband_port_data_received_bytes_total{{{port}}} {2e12 + rx * elapsed:.6e}",
        "# TYPE node_infiniband_rate_bytes_per_second gauge",
        f"node_infiniband_rate_bytes_per_second{{{port}}} {rate:.0f}",
    ]
    if uname:
        lines += ["# HELP node_uname_info Labeled system information as provided by the uname system call.",
                  "# TYPE node_uname_info gauge",
                  f'node_uname_info{{domainname="(none)",machine="x86_64",nodename="{node}",'
                  f'release="{release}",sysname="Linux",version="#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1"}} 1']
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    dcgm = TextEndpoint(dcgm_text)
    node_01, node_02, node_03 = (TextEndpoint(lambda: node_text("node-01")), TextEndpoint(lambda: node_text("node-02")),
                                 TextEndpoint(lambda: node_text("node-03", uname=False)))
    # node-02's exporter is scraped twice: by its IP and by its DNS name (two service discoveries).
    node_02_by_name = TextEndpoint(lambda: node_text("node-02"))
    node_04 = TextEndpoint(lambda: node_text("node-04", release=f"6.1.0-{int(time.time() // NEW_KERNEL_EVERY_S)}-amd64"))
    endpoints = [dcgm, node_01, node_02, node_02_by_name, node_03, node_04]
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-link-hosts"), dcgm.port, node_targets={
        node_01.port: "10.0.0.5:9100", node_02.port: "10.0.0.6:9100", node_02_by_name.port: "node-02:9100",
        node_03.port: "10.0.0.7:9100", node_04.port: "10.0.0.8:9100"})
    with scraped(server, lambda: server.series_count("count(node_infiniband_rate_bytes_per_second)") == 5
                 and server.series_count("count(node_uname_info)") == 4
                 and server.series_count("count(DCGM_FI_PROF_NVLINK_TX_BYTES)") == 2,
                 "max(timestamp(node_infiniband_rate_bytes_per_second))", endpoints):
        yield server


def read_rows(prometheus: PrometheusServer, tmp_path: Path) -> tuple[list[dict], list[str]]:
    """Three instants a rate window after the first scrapes, and the series set aside."""
    start = prometheus.first_scrape_s + 6
    wait_for(lambda: time.time() > start + 3, 15, "a rate window of scrapes")
    src = PrometheusLinkSource(tmp_path / "lake", url=prometheus.url, step_s=1, rate_window_s=5,
                               state_path=tmp_path / "links.json")
    return src.read_range(start, start + 2).to_pylist(), src.rejected_series


def test_a_node_scraped_by_ip_gives_its_ports_under_its_name_beside_its_gpus(prometheus, tmp_path):
    rows, _ = read_rows(prometheus, tmp_path)
    gpu_hosts = {r["host"] for r in rows if r["link_kind"] == "nvlink"}
    port_rows = [r for r in rows if r["link_kind"] == "infiniband" and r["host"] in ("node-01", "10.0.0.5")]
    assert {r["host"] for r in port_rows} == {"node-01"} and "node-01" in gpu_hosts, \
        f"node-01's port landed under {sorted({r['host'] for r in port_rows})}, its GPUs under {sorted(gpu_hosts)}"
    assert len(port_rows) == 3, "one row per instant"
    tx, rx, rate = PORT_RATES["node-01"]
    for r in port_rows:
        assert r["device"] == "mlx5_0/1" and r["capacity_bytes_per_s"] == rate
        assert r["tx_bytes_per_s"] == pytest.approx(tx, rel=0.02) and r["rx_bytes_per_s"] == pytest.approx(rx, rel=0.02)


def test_a_node_scraped_under_two_instance_labels_gives_its_port_once(prometheus, tmp_path):
    rows, rejected = read_rows(prometheus, tmp_path)
    port_rows = [r for r in rows if r["link_kind"] == "infiniband" and r["host"] in ("node-02", "10.0.0.6")]
    per_instant = Counter((r["host"], r["sampled_at"]) for r in port_rows)
    assert {host for host, _ in per_instant} == {"node-02"}, f"node-02's port under {sorted(per_instant)}"
    assert len(per_instant) == 3 and set(per_instant.values()) == {1}
    tx, rx, rate = PORT_RATES["node-02"]
    assert all(r["tx_bytes_per_s"] == pytest.approx(tx, rel=0.02) and r["capacity_bytes_per_s"] == rate
               for r in port_rows)
    # the second target's three quantities are set aside, each saying which target is read
    second = [reason for reason in rejected if "link infiniband mlx5_0/1 on node-02" in reason]
    assert len(second) == 3 and all("is also scraped as {'job': 'node', 'instance'" in reason for reason in second)


def test_a_node_without_node_uname_info_keeps_its_rows_under_its_instance_and_says_why(prometheus, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="joulehouse.collectors.sources.links"):
        rows, _ = read_rows(prometheus, tmp_path)
    port_rows = [r for r in rows if r["link_kind"] == "infiniband" and r["host"] == "10.0.0.7"]
    assert len(port_rows) == 3, "node-03's port readings were lost"
    assert all(r["tx_bytes_per_s"] == pytest.approx(PORT_RATES["node-03"][0], rel=0.02) for r in port_rows)
    unnamed = [rec.getMessage() for rec in caplog.records
               if rec.levelno == logging.WARNING and "node_uname_info" in rec.getMessage()]
    assert len(unnamed) == 1 and "10.0.0.7:9100" in unnamed[0], [rec.getMessage() for rec in caplog.records]
    assert not any(instance in unnamed[0] for instance in ("10.0.0.5", "10.0.0.6", "node-02:9100")), \
        "a node whose name node_uname_info gives was reported"


def test_a_node_rebooted_into_a_new_kernel_keeps_its_name_and_the_query_its_answer(prometheus, tmp_path):
    # Two node_uname_info series (old and new release) inside one look-back window: joined as they
    # are, Prometheus refuses the whole range query (many-to-many matching), every host's links lost.
    rows, _ = read_rows(prometheus, tmp_path)
    port_rows = [r for r in rows if r["link_kind"] == "infiniband" and r["host"] in ("node-04", "10.0.0.8")]
    assert Counter(r["host"] for r in port_rows) == {"node-04": 3}
    assert all(r["rx_bytes_per_s"] == pytest.approx(PORT_RATES["node-04"][1], rel=0.02) for r in port_rows)


def test_a_nodes_own_collector_reads_its_ports_where_prometheus_scrapes_it_by_ip(prometheus, tmp_path):
    """`joulehouse collect --source links` on node-01 picked its node_exporter series by
    instance=~"node-01(:port)?", which matches nothing where Prometheus scrapes by IP: a node-local
    collector read no InfiniBand port at all. It picks them by the node's name now, and a node
    without node_uname_info still by its instance."""
    from joulehouse.cli.collect import _build_sources
    from joulehouse.collectors.settings import CollectorSettings

    settings = CollectorSettings(prometheus_url=prometheus.url, prometheus_step_s=1,
                                 dcgm_state_path=str(tmp_path / "dcgm.json"))
    start = prometheus.first_scrape_s + 6
    wait_for(lambda: time.time() > start + 3, 15, "a rate window of scrapes")
    for host, instance in (("node-01", "10.0.0.5"), ("10.0.0.7", "10.0.0.7")):
        [scheduled] = _build_sources(["links"], host, tmp_path / host / "lake", settings, 0, CollectorSettings())
        ports = [r for r in scheduled.source.read_range(start, start + 2).to_pylist() if r["link_kind"] == "infiniband"]
        assert {r["host"] for r in ports} == {host} and len(ports) == 3, (host, sorted({r["host"] for r in ports}))
