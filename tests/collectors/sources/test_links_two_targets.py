"""A link scraped under two Prometheus targets at once (two jobs over one dcgm-exporter or one
node_exporter): the range query puts both targets' values on the same instants, so rows do not
double, but one target's readings silently overwrote the other's. Each link's quantity is now read
from one target and the other's samples are reported; an exporter that took over is still read."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from joulehouse.collectors.sources.links import QUANTITY_LABEL, PrometheusLinkSource, pivot_link_result
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, wait_for

GPU = {"gpu": "0", "UUID": "GPU-a", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-01"}


def series(column: str, target: dict[str, str], values: dict[int, float], **labels: str) -> dict:
    """One series of the links query_range answer, as Prometheus gives it (values as text)."""
    return {"metric": {**labels, QUANTITY_LABEL: column, **target},
            "values": [[t, repr(v)] for t, v in sorted(values.items())]}


def tx_by_instant(result: list[dict], link_kind: str) -> dict[float, float]:
    table, _ = pivot_link_result(result)
    return {r["sampled_at"].timestamp(): r["tx_bytes_per_s"] for r in table.to_pylist() if r["link_kind"] == link_kind}


def test_a_second_job_over_one_dcgm_exporter_is_reported_and_does_not_take_over_the_readings():
    # job gpu-metrics (a PodMonitor added mid-range) scrapes the same exporter from 150 s on, its
    # readings a fraction of a scrape later; the answer lists series in Prometheus' label order.
    first = {"job": "dcgm-exporter", "instance": "10.0.0.5:9400"}
    second = {"job": "gpu-metrics", "instance": "10.0.0.5:9400"}
    steps, late = range(100, 200, 10), range(150, 200, 10)
    result = [series("rx_bytes_per_s", first, {t: 10.0e9 for t in steps}, **GPU),
              series("rx_bytes_per_s", second, {t: 10.6e9 for t in late}, **GPU),
              series("tx_bytes_per_s", first, {t: 5.0e9 for t in steps}, **GPU),
              series("tx_bytes_per_s", second, {t: 5.3e9 for t in late}, **GPU)]
    table, set_aside = pivot_link_result(result)
    rows = table.to_pylist()
    assert [r["sampled_at"].timestamp() for r in rows] == list(steps)
    assert {(r["tx_bytes_per_s"], r["rx_bytes_per_s"]) for r in rows} == {(5.0e9, 10.0e9)}, \
        "the link's readings switched exporter mid-range"
    assert len(set_aside) == 2 and all(
        "5 samples set aside: link nvlink GPU-a on node-01" in reason and "gpu-metrics" in reason
        and "also scraped as {'job': 'dcgm-exporter', 'instance': '10.0.0.5:9400'}" in reason for reason in set_aside)


def test_a_node_exporter_scraped_by_two_jobs_gives_each_port_one_reading_and_reports_the_other():
    port = {"device": "mlx5_0", "port": "1"}
    node, ib = {"job": "node", "instance": "node-01:9100"}, {"job": "node-ib", "instance": "node-01:9100"}
    steps = range(100, 160, 10)
    result = [series("tx_bytes_per_s", node, {t: 1.50e9 for t in steps}, **port),
              series("tx_bytes_per_s", ib, {t: 1.52e9 for t in steps if t != 130}, **port)]
    assert tx_by_instant(result, "infiniband") == {float(t): 1.50e9 for t in steps}
    _, set_aside = pivot_link_result(result)
    assert len(set_aside) == 1 and "5 samples set aside: link infiniband mlx5_0/1 on node-01 (tx_bytes_per_s)" in set_aside[0]


def test_an_exporter_that_took_over_is_read_from_its_first_reading():
    # A new exporter pod (new instance) from 160 s on; the old one's last reading stands two steps
    # more (the query's last_over_time), over the new one's first two.
    old = {"job": "dcgm-exporter", "instance": "10.0.0.5:9400"}
    new = {"job": "dcgm-exporter", "instance": "10.0.0.6:9400"}
    result = [series("tx_bytes_per_s", old, {t: 4.0e9 for t in range(100, 180, 10)}, **GPU),
              series("tx_bytes_per_s", new, {t: 6.0e9 for t in range(160, 260, 10)}, **GPU)]
    assert tx_by_instant(result, "nvlink") == {float(t): 4.0e9 if t < 160 else 6.0e9 for t in range(100, 260, 10)}


@pytest.mark.integration
@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason=f"{PROMETHEUS} is not installed (Debian package 'prometheus')")
def test_a_real_prometheus_scraping_one_exporter_under_two_jobs_reports_the_second(tmp_path):
    """Before: 10 rows for 10 instants, every one job gpu-metrics' reading, nothing reported."""
    scrapes = itertools.count(1)

    def exporter_text() -> str:
        n = next(scrapes)  # each scrape a new reading, RX twice TX: a row mixing two scrapes shows
        labels = ",".join(f'{k}="{v}"' for k, v in GPU.items())
        return f"DCGM_FI_PROF_NVLINK_TX_BYTES{{{labels}}} {n * 1e9:.0f}\nDCGM_FI_PROF_NVLINK_RX_BYTES{{{labels}}} {n * 2e9:.0f}\n"

    exporter = TextEndpoint(exporter_text)
    server = PrometheusServer(tmp_path / "prometheus", {"dcgm-exporter": [exporter.port], "gpu-metrics": [exporter.port]})
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_PROF_NVLINK_TX_BYTES)") == 2, 30, "both jobs' first scrape")
        time.sleep(12)
        src = PrometheusLinkSource(tmp_path / "lake", url=server.url, step_s=1, rate_window_s=5,
                                   state_path=tmp_path / "links.json", selector='Hostname="node-01"')
        end_s = int(time.time()) - 1
        rows = src.read_range(end_s - 9, end_s).to_pylist()
    finally:
        server.stop()
        exporter.stop()
    assert len(rows) == 10 and all(r["rx_bytes_per_s"] == 2 * r["tx_bytes_per_s"] for r in rows), rows
    assert len(src.rejected_series) == 2 and all(
        "job': 'gpu-metrics'" in reason and "also scraped as {'job': 'dcgm-exporter'" in reason
        for reason in src.rejected_series), src.rejected_series
