"""The DCGM source catching up past Prometheus' retention. After a stop longer than the retention
(or a first start whose initial lookback is longer), the oldest ranges hold nothing any more: the
sync read them as empty and moved its watermark past them, saying nothing, and the lake had a hole
no one could explain. It now says which readings are gone (one warning, the span in UTC and hours),
counts their seconds in the collector's metrics and reads on. Against a real Prometheus started
with a short `--storage.tsdb.retention.time`; a stand-in only for a Prometheus that does not say
its retention (an old one, a proxy refusing the status endpoints)."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import requests
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from joulehouse.collectors.collect import Collector
from joulehouse.collectors.metrics import CollectorStatsMetrics
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.dcgm import DcgmSource
from joulehouse.collectors.sources.dcgm_reader import storage_retention_s
from joulehouse.collectors.sources.dcgm_state import iso_utc
from prometheus_server import PROMETHEUS, HttpStub, PrometheusServer, TextEndpoint, wait_for

pytestmark = [pytest.mark.integration]

# One GPU as dcgm-exporter publishes it: power 250.5 W.
EXPOSITION = ('# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n'
              'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0000000a-0000-4000-8000-000000000000",'
              'modelName="NVIDIA H100 80GB HBM3",Hostname="node-01"} 250.5\n')
RETENTION_S = 3600
LOST = re.compile(r"the readings of (\S+)\.\.(\S+) \(([\d.]+) h\) are older than Prometheus at \S+ keeps "
                  r"\(its retention: ([\d.]+) h\)")
DAY_S = 86400


@contextmanager
def prometheus_with(folder: Path, exporter_port: int, *flags: str) -> Iterator[PrometheusServer]:
    """The tests' Prometheus started with `flags` too."""
    server = PrometheusServer(folder / "server", exporter_port, flags=flags)
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 1, 30, "the first scrape")
        server.first_scrape_s = server.series_count("min(timestamp(DCGM_FI_DEV_POWER_USAGE))")
        time.sleep(3)  # a few 1 s scrapes to read
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def exporter() -> Iterator[TextEndpoint]:
    if not Path(PROMETHEUS).exists():
        pytest.skip(f"{PROMETHEUS} is not installed (Debian package 'prometheus')")
    endpoint = TextEndpoint(lambda: EXPOSITION)
    yield endpoint
    endpoint.stop()


@pytest.fixture(scope="module")
def one_hour(exporter: TextEndpoint, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """A Prometheus that keeps an hour of samples."""
    with prometheus_with(tmp_path_factory.mktemp("one-hour"), exporter.port,
                         f"--storage.tsdb.retention.time={RETENTION_S // 3600}h") as server:
        yield server


def source(tmp_path: Path, url: str, **kw: object) -> DcgmSource:
    kw = {"step_s": 1, "settle_s": 1, "retries": 0, "selector": '{Hostname="node-01"}', **kw}
    return DcgmSource(tmp_path / "lake", url=url, state_path=tmp_path / "dcgm-watermark.json", **kw)


def stopped_since(tmp_path: Path, watermark_s: int) -> None:
    """The state a collector stopped at `watermark_s` left (a whole second: step 1 s)."""
    (tmp_path / "dcgm-watermark.json").write_text(json.dumps(
        {"state_version": 1, "watermark_at": iso_utc(watermark_s), "pending": None}))


def watermark_s(tmp_path: Path) -> float:
    return datetime.fromisoformat(json.loads((tmp_path / "dcgm-watermark.json").read_text())["watermark_at"]).timestamp()


def lake_power_w(tmp_path: Path) -> list[float]:
    folder = tmp_path / "lake" / "gpu_samples"
    if not folder.exists():
        return []
    return ds.dataset(folder, format="parquet", partitioning="hive").to_table().column("power_w").to_pylist()


def lost_warnings(caplog: pytest.LogCaptureFixture) -> list[re.Match]:
    return [m for r in caplog.records if r.levelno == logging.WARNING and (m := LOST.search(r.getMessage()))]


def lost_seconds_metric(collector: Collector) -> dict[str, float]:
    registry = CollectorRegistry()
    registry.register(CollectorStatsMetrics(collector))
    return {s.labels["source"]: s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples if s.name == "joulehouse_collector_readings_lost_past_retention_seconds_total"}


def test_a_stop_longer_than_the_retention_names_the_lost_span_once_counts_it_and_reads_on(one_hour, tmp_path, caplog):
    stopped_at_s = int(time.time()) - 3 * DAY_S
    stopped_since(tmp_path, stopped_at_s)
    dcgm = source(tmp_path, one_hour.url)
    collector = Collector([dcgm], lake=tmp_path / "lake", settings=CollectorSettings(), spool_dir=tmp_path / "spool")
    caplog.set_level(logging.INFO, logger="joulehouse.collectors.sources.dcgm")

    before_s = time.time()
    collector.poll()  # the collect loop's read: the sync
    after_s = time.time()

    (lost,) = lost_warnings(caplog)
    from_s, to_s = datetime.fromisoformat(lost[1]).timestamp(), datetime.fromisoformat(lost[2]).timestamp()
    assert from_s == stopped_at_s  # from the watermark...
    assert before_s - RETENTION_S - 1 <= to_s <= after_s - RETENTION_S + 1  # ...to what Prometheus still keeps
    assert float(lost[3]) == round((to_s - from_s) / 3600, 1) and 71 <= float(lost[3]) <= 72
    assert float(lost[4]) == 1.0
    assert lost_seconds_metric(collector) == {"dcgm": pytest.approx(to_s - from_s, abs=1e-3)}
    # read on: what Prometheus holds is in the lake, the watermark past it
    assert lake_power_w(tmp_path) and set(lake_power_w(tmp_path)) == {250.5}
    assert watermark_s(tmp_path) >= one_hour.first_scrape_s + 2

    caplog.clear()
    time.sleep(1.5)
    dcgm.sync()  # caught up: nothing more is lost, nothing more said or counted
    assert lost_warnings(caplog) == []
    assert lost_seconds_metric(collector) == {"dcgm": pytest.approx(to_s - from_s, abs=1e-3)}


def test_a_first_start_whose_lookback_is_longer_than_the_retention_names_what_it_cannot_read(one_hour, tmp_path, caplog):
    dcgm = source(tmp_path, one_hour.url, initial_lookback_s=3 * 3600)
    caplog.set_level(logging.WARNING, logger="joulehouse.collectors.sources.dcgm")
    before_s = time.time()
    dcgm.sync()
    (lost,) = lost_warnings(caplog)
    from_s, to_s = datetime.fromisoformat(lost[1]).timestamp(), datetime.fromisoformat(lost[2]).timestamp()
    assert before_s - 3 * 3600 - 1 <= from_s <= before_s - 3 * 3600 + 1
    assert float(lost[3]) == pytest.approx(2.0, abs=0.05)
    assert dcgm.lost_past_retention_s_total == pytest.approx(to_s - from_s, abs=1e-3)
    assert set(lake_power_w(tmp_path)) == {250.5}


def test_readings_within_the_retention_are_read_without_a_word(one_hour, tmp_path, caplog):
    stopped_since(tmp_path, int(time.time()) - 1800)
    dcgm = source(tmp_path, one_hour.url)
    caplog.set_level(logging.WARNING, logger="joulehouse.collectors.sources.dcgm")
    dcgm.sync()
    assert lost_warnings(caplog) == [] and dcgm.lost_past_retention_s_total == 0
    assert set(lake_power_w(tmp_path)) == {250.5}


def test_a_retention_by_size_alone_says_nothing_it_cannot_know(exporter, tmp_path, caplog):
    # "1GiB" in runtimeinfo: how far back that reaches depends on the data, not on a time
    with prometheus_with(tmp_path / "prometheus", exporter.port, "--storage.tsdb.retention.size=1GB") as server:
        stopped_since(tmp_path, int(time.time()) - 3 * DAY_S)
        dcgm = source(tmp_path, server.url)
        caplog.set_level(logging.WARNING, logger="joulehouse.collectors.sources.dcgm")
        dcgm.sync()
    assert lost_warnings(caplog) == [] and dcgm.lost_past_retention_s_total == 0
    assert set(lake_power_w(tmp_path)) == {250.5}  # read as before


class QueriesOnly(HttpStub):
    """A stand-in for a Prometheus that does not say its retention (before 2.15, or behind a proxy
    passing queries only): forwards /api/v1/query to `upstream`, answers anything else 404."""

    def __init__(self, upstream: str) -> None:
        self.refused: list[str] = []
        self.upstream = upstream
        super().__init__(self._answer)

    def _answer(self, path: str) -> tuple[int, bytes, str]:
        if path.startswith("/api/v1/query?"):
            answer = requests.get(self.upstream + path, timeout=10)
            return answer.status_code, answer.content, answer.headers.get("Content-Type", "application/json")
        self.refused.append(path)
        return 404, b"404 page not found\n", "text/plain"


def test_a_prometheus_that_does_not_say_its_retention_is_read_as_before(one_hour, tmp_path, caplog):
    proxy = QueriesOnly(one_hour.url)
    try:
        stopped_since(tmp_path, int(time.time()) - 3 * DAY_S)
        dcgm = source(tmp_path, proxy.url)
        caplog.set_level(logging.WARNING, logger="joulehouse.collectors.sources.dcgm")
        dcgm.sync()
    finally:
        proxy.stop()
    assert proxy.refused == ["/api/v1/status/runtimeinfo"]  # asked once, refused, not retried
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert dcgm.lost_past_retention_s_total == 0
    assert set(lake_power_w(tmp_path)) == {250.5} and watermark_s(tmp_path) >= one_hour.first_scrape_s + 2


@pytest.mark.parametrize(("said", "retention_s"), [
    ("15d", 15 * DAY_S),  # Prometheus' default
    ("1d12h or 1GiB", 36 * 3600),  # --storage.tsdb.retention.time=36h --storage.tsdb.retention.size=1GB
    ("2w", 14 * DAY_S), ("1y", 365 * DAY_S), ("1m30s", 90), ("1500ms", 1.5),
    ("1GiB", None),  # by size alone
    ("", None), ("forever", None),
])
def test_the_retention_prometheus_says_reads_as_seconds(said, retention_s):
    assert storage_retention_s(said) == retention_s


def test_a_sync_that_catches_up_less_than_an_hour_does_not_ask_the_retention(one_hour, tmp_path, caplog):
    """A minute's catch-up cannot reach past what Prometheus keeps: the retention was asked on every
    sync, one more request a minute per node."""
    proxy = QueriesOnly(one_hour.url)
    try:
        stopped_since(tmp_path, int(time.time()) - 1800)
        source(tmp_path, proxy.url).sync()
    finally:
        proxy.stop()
    assert proxy.refused == []
    assert set(lake_power_w(tmp_path)) == {250.5}
