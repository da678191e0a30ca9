"""The network-link source against a real Prometheus scraping dcgm-exporter's NVLink fields and two
node_exporter endpoints in their text format (the infiniband collector's series), with known rates."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, scraped, wait_for

from joulehouse.collectors.sources.links import (IB_RATE, IB_RX_TOTAL, IB_TX_TOTAL, NODE_NAME_SERIES, NVLINK_FIELDS,
                                                PrometheusLinkSource)

pytestmark = [pytest.mark.integration]
if not Path(PROMETHEUS).exists():
    pytest.skip(f"{PROMETHEUS} is not installed (Debian package 'prometheus')", allow_module_level=True)

GPUS = {("node-01", 0): "NVIDIA A100-SXM4-80GB", ("node-01", 1): "NVIDIA A100-SXM4-80GB",
        ("node-02", 0): "NVIDIA H100 80GB HBM3"}
# (host, device, port) -> (tx bytes/s, rx bytes/s, port rate bytes/s): HDR 200 Gb/s and NDR 400 Gb/s.
PORTS = {("node-01", "mlx5_0", "1"): (3.0e9, 1.5e9, 25e9), ("node-01", "mlx5_1", "1"): (0.0, 0.0, 25e9),
         ("node-02", "mlx5_0", "1"): (8.0e9, 12.0e9, 50e9)}
T0 = time.time()


def gpu_uuid(host: str, index: int) -> str:
    return f"GPU-{int(host[-2:]):08x}-0000-4000-8000-{index:012x}"


def nvlink_bytes_per_s(host: str, index: int) -> tuple[float, float | None]:
    """(tx, rx) a GPU publishes; node-01 GPU 1 publishes no RX series (NULL in the lake)."""
    tx = 1.0e9 * (index + 1) * int(host[-2:])
    return tx, None if (host, index) == ("node-01", 1) else 2 * tx


def dcgm_text() -> str:
    lines = ["# HELP DCGM_FI_PROF_NVLINK_TX_BYTES The rate of data transmitted over NVLink, not including protocol headers, in bytes per second.",
             "# TYPE DCGM_FI_PROF_NVLINK_TX_BYTES gauge",
             "# HELP DCGM_FI_PROF_NVLINK_RX_BYTES The rate of data received over NVLink, not including protocol headers, in bytes per second.",
             "# TYPE DCGM_FI_PROF_NVLINK_RX_BYTES gauge"]
    for (host, index), model in GPUS.items():
        labels = f'gpu="{index}",UUID="{gpu_uuid(host, index)}",device="nvidia{index}",modelName="{model}",Hostname="{host}"'
        tx, rx = nvlink_bytes_per_s(host, index)
        lines.append(f"DCGM_FI_PROF_NVLINK_TX_BYTES{{{labels}}} {tx:.0f}")
        if rx is not None:
            lines.append(f"DCGM_FI_PROF_NVLINK_RX_BYTES{{{labels}}} {rx:.0f}")
    return "\n".join(lines) + "\n"


def node_text(host: str) -> str:
    """node_exporter's infiniband collector: byte counters growing at the known rates since T0."""
    elapsed = time.time() - T0
    out = {"transmitted": [], "received": [], "rate": []}
    for (h, device, port), (tx, rx, rate) in PORTS.items():
        if h != host:
            continue
        labels = f'device="{device}",port="{port}"'
        out["transmitted"].append(f"node_infiniband_port_data_transmitted_bytes_total{{{labels}}} {1e12 + tx * elapsed:.6e}")
        out["received"].append(f"node_infiniband_port_data_received_bytes_total{{{labels}}} {2e12 + rx * elapsed:.6e}")
        out["rate"].append(f"node_infiniband_rate_bytes_per_second{{{labels}}} {rate:.0f}")
    return "\n".join([
        "# HELP node_infiniband_port_data_transmitted_bytes_total Number of data octets transmitted on all links",
        "# TYPE node_infiniband_port_data_transmitted_bytes_total counter", *out["transmitted"],
        "# HELP node_infiniband_port_data_received_bytes_total Number of data octets received on all links",
        "# TYPE node_infiniband_port_data_received_bytes_total counter", *out["received"],
        "# HELP node_infiniband_rate_bytes_per_second Maximum signal transfer rate",
        "# TYPE node_infiniband_rate_bytes_per_second gauge", *out["rate"],
    ]) + "\n"


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    endpoints = [TextEndpoint(dcgm_text), TextEndpoint(lambda: node_text("node-01")),
                 TextEndpoint(lambda: node_text("node-02"))]
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-links"), endpoints[0].port,
                              node_targets={endpoints[1].port: "node-01:9100", endpoints[2].port: "node-02:9100"})
    with scraped(server, lambda: server.series_count("count(node_infiniband_rate_bytes_per_second)") == 3
                 and server.series_count("count(DCGM_FI_PROF_NVLINK_TX_BYTES)") == 3,
                 "max(timestamp(node_infiniband_rate_bytes_per_second))", endpoints):
        yield server


def source(prometheus: PrometheusServer, tmp_path: Path, **kw: object) -> PrometheusLinkSource:
    kw.setdefault("step_s", 1)
    kw.setdefault("rate_window_s", 5)
    kw.setdefault("state_path", tmp_path / "state" / "links.json")
    return PrometheusLinkSource(tmp_path / "lake", url=prometheus.url, **kw)


def test_nvlink_and_infiniband_rates_land_with_their_capacity(prometheus, tmp_path):
    # The counters' rate needs a window of scrapes behind the first instant read.
    start = prometheus.first_scrape_s + 6
    wait_for(lambda: time.time() > start + 3, 15, "a rate window of scrapes")
    src = source(prometheus, tmp_path)
    rows = src.read_range(start, start + 2).to_pylist()
    assert src.rejected_series == []
    nvlink = [r for r in rows if r["link_kind"] == "nvlink"]
    assert {(r["host"], r["gpu_index"]) for r in nvlink} == set(GPUS)
    assert len(nvlink) == 3 * 3, "one row per GPU and instant"
    for r in nvlink:
        assert r["device"] == gpu_uuid(r["host"], r["gpu_index"]) and r["gpu_model"] == GPUS[(r["host"], r["gpu_index"])]
        assert (r["tx_bytes_per_s"], r["rx_bytes_per_s"]) == nvlink_bytes_per_s(r["host"], r["gpu_index"])
        assert r["capacity_bytes_per_s"] is None, "dcgm-exporter publishes no NVLink capacity"
    ports = [r for r in rows if r["link_kind"] == "infiniband"]
    assert {(r["host"], r["device"]) for r in ports} == {(h, f"{d}/{p}") for h, d, p in PORTS}
    for r in ports:
        host_, (device, port) = r["host"], r["device"].split("/")
        tx, rx, rate = PORTS[(host_, device, port)]
        assert r["capacity_bytes_per_s"] == rate
        # rate() over counters scraped at jittered instants: within 2% of the true rate.
        assert r["tx_bytes_per_s"] == pytest.approx(tx, rel=0.02, abs=1.0)
        assert r["rx_bytes_per_s"] == pytest.approx(rx, rel=0.02, abs=1.0)
        assert r["gpu_index"] is None and r["source"] == "prometheus-links"


def test_sync_writes_link_samples_once(prometheus, tmp_path):
    wait_for(lambda: time.time() > prometheus.first_scrape_s + 8, 15, "a few scrapes")
    src = source(prometheus, tmp_path, settle_s=1, initial_lookback_s=4)
    assert src.sync(), "the first sync wrote no file"
    first_done = time.time()
    wait_for(lambda: time.time() > first_done + 3, 10, "newer scrapes")
    assert src.sync(), "the second sync wrote nothing newer"
    rows = ds.dataset(tmp_path / "lake" / "link_samples", format="parquet", partitioning="hive").to_table().to_pylist()
    keys = [(r["host"], r["device"], r["sampled_at"]) for r in rows]
    assert len(keys) == len(set(keys)), "an instant was written twice"
    assert {r["link_kind"] for r in rows} == {"nvlink", "infiniband"}
    assert src.state.load()["pending"] is None


def test_the_shipped_configs_export_and_keep_every_link_series():
    repo = Path(__file__).resolve().parents[3]
    counters = (repo / "infra" / "dcgm-exporter" / "counters.csv").read_text()
    config = (repo / "infra" / "prometheus" / "prometheus.yml").read_text()
    assert all(f"{name}," in counters for name in NVLINK_FIELDS)
    keeps = re.findall(r'regex: "([^"]+)"', config)
    # node_uname_info too: its nodename names the host of the ports (the node job's instance may be
    # an IP), and the node job dropped it
    for name in [*NVLINK_FIELDS, IB_TX_TOTAL, IB_RX_TOTAL, IB_RATE, NODE_NAME_SERIES]:
        assert any(re.fullmatch(keep, name) for keep in keeps), name


def test_no_gauge_is_written_while_prometheus_was_not_scraping(tmp_path):
    """Prometheus stopped (SIGSTOP) for 6 s writes no staleness markers; a bare gauge in a range
    query then repeated its last sample at every step of the gap. Now a gauge is written only at
    steps within two steps of a scrape."""
    endpoints = [TextEndpoint(dcgm_text), TextEndpoint(lambda: node_text("node-01"))]
    server = PrometheusServer(tmp_path / "prometheus", endpoints[0].port, node_targets={endpoints[1].port: "node-01:9100"})
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_PROF_NVLINK_TX_BYTES)") == 3, 30, "the first scrapes")
        time.sleep(3)  # a few scrapes before the gap
        stopped_s, resumed_s = server.pause_scrapes(6)
        wait_for(lambda: server.series_count("min(timestamp(DCGM_FI_PROF_NVLINK_TX_BYTES))") > resumed_s + 2, 15,
                 "scrapes after the gap")
        rows = source(server, tmp_path).read_range(int(stopped_s) - 3, int(resumed_s) + 2).to_pylist()
    finally:
        server.stop()
        for endpoint in endpoints:
            endpoint.stop()
    gauges = [r for r in rows if r["link_kind"] == "nvlink" or r["capacity_bytes_per_s"] is not None]
    assert [r for r in gauges if r["sampled_at"].timestamp() < stopped_s], "no reading before the gap"
    # two 1 s steps after the last scrape a gauge may still stand; past them, nothing until scrapes resume
    in_gap = [r for r in gauges if stopped_s + 2.5 < r["sampled_at"].timestamp() < resumed_s - 0.5]
    assert not in_gap, f"{len(in_gap)} gauge readings while Prometheus was not scraping"
