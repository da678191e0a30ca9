"""Pods as jobs: dcgm-exporter's Kubernetes labels (pod, namespace, container) on series stored
in the real Prometheus become rows of the lake's jobs, the namespace as team, one row per pod
and GPU however many sync ranges it spans."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from joulehouse.collectors.sources.dcgm import DcgmSource
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, wait_for

pytestmark = [pytest.mark.integration]
if not Path(PROMETHEUS).exists():
    pytest.skip(f"{PROMETHEUS} is not installed (Debian package 'prometheus')", allow_module_level=True)

HOST = "node-07"
UUIDS = {0: "GPU-00000007-0000-4000-8000-000000000000", 1: "GPU-00000007-0000-4000-8000-000000000001"}


class PodExporter(TextEndpoint):
    """dcgm-exporter's text for 2 GPUs; `pods[i]` = (namespace, pod, container) or None (free)."""

    def __init__(self) -> None:
        self.pods: dict[int, tuple[str, str, str] | None] = {0: None, 1: None}
        super().__init__(self.text)

    def text(self) -> str:
        lines = ["# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).", "# TYPE DCGM_FI_DEV_POWER_USAGE gauge"]
        for index, uuid in UUIDS.items():
            pod = self.pods[index]
            # dcgm-exporter writes empty pod labels for a free GPU; Prometheus drops empty labels.
            ns, name, container = pod if pod else ("", "", "")
            lines.append(f'DCGM_FI_DEV_POWER_USAGE{{gpu="{index}",UUID="{uuid}",modelName="NVIDIA H100 80GB HBM3",'
                         f'Hostname="{HOST}",container="{container}",namespace="{ns}",pod="{name}"}} {200 + index}')
        return "\n".join(lines) + "\n"


def job_rows(lake: Path) -> list[dict]:
    rows = []
    for path in sorted((lake / "jobs").rglob("*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return sorted(rows, key=lambda r: (r["job_id"], r["gpu_uuid"]))


def test_pods_on_gpus_become_jobs_with_their_namespace_as_team(tmp_path):
    exporter = PodExporter()
    exporter.pods[0] = ("vision", "train-7f9c", "trainer")
    prometheus = PrometheusServer(tmp_path / "prometheus", exporter.port)
    try:
        wait_for(lambda: prometheus.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 2, 30, "the first scrape")
        first_s = prometheus.series_count("min(timestamp(DCGM_FI_DEV_POWER_USAGE))")
        wait_for(lambda: time.time() > first_s + 4, 10, "pod 1 on GPU 0 for a few scrapes")
        switched_s = time.time()
        exporter.pods[0] = ("search", "serve-5d2a", "server")
        exporter.pods[1] = ("nlp", "eval-0", "eval")
        wait_for(lambda: time.time() > switched_s + 4, 10, "the new pods for a few scrapes")
        source = DcgmSource(tmp_path / "lake", url=prometheus.url, step_s=1, settle_s=1,
                            initial_lookback_s=time.time() - first_s + 1, state_path=tmp_path / "state" / "dcgm.json")
        source.sync()
        assert source.rows_written_total > 0  # what the collector's metrics count for this source
        middle = job_rows(tmp_path / "lake")
        wait_for(lambda: time.time() > switched_s + 8, 10, "more scrapes of the new pods")
        source.sync()  # a second range: the pods still running are extended, not added again
        ended_s = time.time()
    finally:
        prometheus.stop()
        exporter.stop()
    rows = job_rows(tmp_path / "lake")
    assert [(r["job_id"], r["gpu_uuid"]) for r in rows] == [
        ("nlp/eval-0", UUIDS[1]), ("search/serve-5d2a", UUIDS[0]), ("vision/train-7f9c", UUIDS[0])]
    by_job = {r["job_id"]: r for r in rows}
    assert {r["job_id"]: r["team"] for r in rows} == {"nlp/eval-0": "nlp", "search/serve-5d2a": "search",
                                                     "vision/train-7f9c": "vision"}
    assert by_job["search/serve-5d2a"]["container"] == "server" and by_job["vision/train-7f9c"]["pod"] == "train-7f9c"
    assert {r["host"] for r in rows} == {HOST} and {r["gpu_assignment"] for r in rows} == {"dcgm-kubernetes"}
    assert all(r["user"] is None for r in rows)
    first = by_job["vision/train-7f9c"]
    # Held from the first scrape to the switch (within a scrape and a step either side).
    assert abs(first["started_at"].timestamp() - first_s) <= 2
    assert abs(first["ended_at"].timestamp() - switched_s) <= 3
    second = by_job["search/serve-5d2a"]
    assert abs(second["started_at"].timestamp() - switched_s) <= 3
    before = {r["job_id"]: r for r in middle}["search/serve-5d2a"]
    assert second["started_at"] == before["started_at"] and second["ended_at"] > before["ended_at"]
    assert second["ended_at"].timestamp() <= ended_s
    assert len(list((tmp_path / "lake" / "jobs").rglob("*.parquet"))) == 1  # one file per day and host, rewritten
