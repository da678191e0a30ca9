"""What Prometheus says beside a range read's result: the result's type and its warnings, which
prometheus-api-client's custom_query / custom_query_range drop. A range answered as something other
than a matrix, or with warnings (a partial answer), is a SourceError that keeps the range pending,
never rows written and a watermark moved past readings that were not read."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import requests

from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.dcgm import DcgmSource
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, wait_for

pytestmark = [pytest.mark.integration]

# One GPU as dcgm-exporter publishes it: power 250.5 W.
EXPOSITION = ('# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n'
              'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-0000000a-0000-4000-8000-000000000000",'
              'modelName="NVIDIA H100 80GB HBM3",Hostname="node-01"} 250.5\n')


class Prometheus(PrometheusServer):
    """The test server, with its config folder kept so that a test can reload it with a remote read."""

    def __init__(self, folder: Path, port: int) -> None:
        super().__init__(folder, port)
        self.config = folder / "prometheus.yml"
        self.scrape_config = self.config.read_text()

    def reload(self, extra: str, *, warns: bool) -> None:
        """The scrape config and `extra`, reloaded (SIGHUP); returns once answers carry warnings or not, as `warns`."""
        self.config.write_text(self.scrape_config + extra)
        self.process.send_signal(signal.SIGHUP)
        wait_for(lambda: ("warnings" in requests.get(f"{self.url}/api/v1/query", params={"query": "up[5s]"},
                                                     timeout=2).json()) == warns,
                 20, f"the reloaded config to answer {'with' if warns else 'without'} warnings")


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    if not Path(PROMETHEUS).exists():
        pytest.skip(f"{PROMETHEUS} is not installed (Debian package 'prometheus')")
    exporter = TextEndpoint(lambda: EXPOSITION)
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), exporter.port)
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 1, 30, "the first scrape")
        time.sleep(4)  # a few 1 s scrapes to read
        yield server
    finally:
        server.stop()
        exporter.stop()


def source(tmp_path: Path, url: str, selector: str = '{Hostname="node-01"}') -> DcgmSource:
    return DcgmSource(tmp_path / "lake", url=url, step_s=1, settle_s=1, initial_lookback_s=30, retries=0,
                      state_path=tmp_path / "dcgm-watermark.json", selector=selector)


def lake_power_w(tmp_path: Path) -> list[float]:
    folder = tmp_path / "lake" / "gpu_samples"
    if not folder.exists():
        return []
    return ds.dataset(folder, format="parquet", partitioning="hive").to_table().column("power_w").to_pylist()


def test_a_selector_that_makes_the_samples_query_an_instant_vector_fails_and_keeps_the_range(prometheus, tmp_path):
    # A comment in the selector setting comments out the `[window]` of the samples query: Prometheus
    # answers an instant vector ("value", not "values"), read as a matrix of no samples, and the
    # watermark moved past readings that are in Prometheus.
    commented = source(tmp_path, prometheus.url, selector='{Hostname="node-01"} # rack 4')
    with pytest.raises(SourceError, match=r"vector.*matrix") as raised:
        commented.sync()
    assert "# rack 4" in str(raised.value)  # the query as sent, so that the setting at fault shows
    state = commented.state.load()
    assert state["watermark_at"] is None and state["pending"] is not None
    assert lake_power_w(tmp_path) == []

    # the same readings with the selector mended: the range left pending is read, none skipped
    mended = source(tmp_path, prometheus.url)
    mended.sync()
    assert len(lake_power_w(tmp_path)) >= 3 and set(lake_power_w(tmp_path)) == {250.5}
    assert mended.state.load()["watermark_at"] >= state["pending"]["end_at"]


def test_a_partial_answer_keeps_the_range_pending_with_the_warning_and_is_read_once_whole(prometheus, tmp_path):
    # A remote read that fails makes Prometheus answer from its own storage alone, with a warning.
    prometheus.reload("remote_read:\n  - url: http://127.0.0.1:9/read\n    read_recent: true\n", warns=True)
    try:
        partial = source(tmp_path, prometheus.url)
        with pytest.raises(SourceError, match="remote_read.*connection refused"):
            partial.sync()
        state = partial.state.load()
        assert state["watermark_at"] is None and state["pending"] is not None
        assert lake_power_w(tmp_path) == []
    finally:
        prometheus.reload("", warns=False)

    whole = source(tmp_path, prometheus.url)
    whole.sync()
    assert len(lake_power_w(tmp_path)) >= 3 and set(lake_power_w(tmp_path)) == {250.5}


def test_a_scalar_answer_to_the_samples_query_is_a_source_error_naming_it(tmp_path):
    # Prometheus' documented scalar answer (a proxy or a query that is not a range can give one); its
    # value is the time, so that the sync's time() query reads it too.
    endpoint = TextEndpoint(lambda: json.dumps(
        {"status": "success", "data": {"resultType": "scalar", "result": [time.time(), str(time.time())]}}))
    try:
        scalar = source(tmp_path, f"http://127.0.0.1:{endpoint.port}")
        with pytest.raises(SourceError, match=r"scalar.*matrix"):
            scalar.sync()
        assert scalar.state.load()["watermark_at"] is None
    finally:
        endpoint.stop()


def test_an_answer_is_decoded_once_for_the_check_and_the_client(tmp_path):
    """The hook that keeps resultType and warnings parsed each answer, then prometheus-api-client
    parsed it again: an hour's raw samples of 136 series at 1 s (11 MB) took 0.56-0.71 s instead of
    0.28-0.34 s, on every window of a catch-up."""
    from joulehouse.collectors.sources.dcgm import DcgmSource

    src = DcgmSource(tmp_path / "lake", url="http://127.0.0.1:9", step_s=1, state_path=tmp_path / "state.json")
    answer = requests.Response()
    answer._content = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode()
    answer.status_code, answer.encoding = 200, "utf-8"
    src._keep_answer(answer)
    assert src._answer.result_type == "matrix"
    assert answer.json() is answer.json(), "the client's json() is the hook's parse, not a second one"
