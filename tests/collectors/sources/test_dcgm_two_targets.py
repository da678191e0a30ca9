"""A GPU scraped under two Prometheus targets at once (two jobs over one dcgm-exporter, or two
exporters on a node) gives each reading twice, a fraction of a scrape apart: the lake must hold it
once. An exporter that takes over from another (a new pod, a new instance) must still be read."""

from __future__ import annotations

import time
from datetime import datetime
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from joulehouse.collectors.sources.dcgm import DcgmSource
from joulehouse.collectors.sources.dcgm_series import pivot_range_result
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, wait_for

GPU = {"gpu": "0", "UUID": "GPU-7a", "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-05"}


def power(job: str, instance: str, times: list[float]) -> dict:
    labels = {"__name__": "DCGM_FI_DEV_POWER_USAGE", **GPU, "job": job, "instance": instance}
    return {"metric": labels, "values": [[t, str(300 + t % 7)] for t in times]}


def row_times(result: list[dict]) -> list[float]:
    table, _ = pivot_range_result(result)
    return [t.timestamp() for t in table.column("sampled_at").to_pylist()]


def test_two_jobs_scraping_one_exporter_give_one_row_per_scrape():
    # Both jobs scrape every 30 s, 12 s apart; the second is the first's readings again.
    result = [power("dcgm-exporter", "10.0.0.5:9400", [1000 + 30 * i for i in range(10)]),
              power("gpu-metrics", "10.0.0.5:9400", [1012 + 30 * i for i in range(10)])]
    times = row_times(result)
    assert times == [1000 + 30 * i for i in range(10)]
    _, set_aside = pivot_range_result(result)
    assert set_aside and "also scraped as {'job': 'dcgm-exporter', 'instance': '10.0.0.5:9400'}" in set_aside[0]


def test_an_exporter_that_took_over_from_another_is_read_and_one_that_filled_a_gap_too():
    # a new exporter pod (new instance) from 1300 on; the old one had also missed 1120..1180
    old = [t for t in range(1000, 1300, 30) if not 1120 <= t <= 1180]
    new = list(range(1305, 1600, 30))
    filler = power("dcgm-exporter", "10.0.0.9:9400", [1135, 1165])
    times = row_times([power("dcgm-exporter", "10.0.0.5:9400", old),
                       power("dcgm-exporter", "10.0.0.6:9400", new), filler])
    assert times == sorted(old + new + [1135, 1165])


@pytest.mark.integration
@pytest.mark.skipif(not Path(PROMETHEUS).exists(), reason=f"{PROMETHEUS} is not installed (Debian package 'prometheus')")
def test_a_real_prometheus_scraping_one_exporter_under_two_jobs_writes_each_scrape_once(tmp_path):
    """Before: 22 rows in 10.4 s for a GPU scraped each second, interleaved 0.36 and 0.64 s apart."""
    exporter = TextEndpoint(lambda: "DCGM_FI_DEV_POWER_USAGE{%s} 250\n" % ",".join(f'{k}="{v}"' for k, v in GPU.items()))
    server = PrometheusServer(tmp_path / "prometheus", {"dcgm-exporter": [exporter.port], "gpu-metrics": [exporter.port]})
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 2, 30, "both jobs' first scrape")
        time.sleep(8)
        src = DcgmSource(tmp_path / "lake", url=server.url, step_s=1, settle_s=1, initial_lookback_s=30,
                         state_path=tmp_path / "state.json", selector='Hostname="node-05"')
        src.sync()
        watermark_s = datetime.fromisoformat(src.state.load()["watermark_at"]).timestamp()
        # every sample Prometheus holds up to the watermark (all of them lie within the lookback)
        per_job = {m["metric"]["job"]: float(m["value"][1])
                   for m in server.query(f"count_over_time(DCGM_FI_DEV_POWER_USAGE[60s] @ {watermark_s})")}
    finally:
        server.stop()
        exporter.stop()
    times = sorted(t.timestamp() for t in ds.dataset(tmp_path / "lake" / "gpu_samples", format="parquet",
                                                      partitioning="hive").to_table().column("sampled_at").to_pylist())
    assert len(per_job) == 2 and len(times) == max(per_job.values()), (per_job, len(times))
    assert all(b - a > 0.9 for a, b in zip(times, times[1:])), "two rows within one scrape interval"

