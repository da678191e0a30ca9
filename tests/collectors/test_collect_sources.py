"""`joulehouse collect` with every source: NVML required (exit 3 when it cannot start), IPMI and
DCGM on their own intervals in their own threads, one failing source never stopping the others."""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pytest
import typer
from typer.testing import CliRunner

from joulehouse.collectors.collect import Collector, Scheduled
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.base import SourceError
from joulehouse.cli.collect import register
from nvml_stub.fixture import GpuState

DCMI_OUTPUT = """
    Instantaneous power reading:                  1150 Watts
    Power reading state is:                   activated
"""
SDR_OUTPUT = """\
Pwr Consumption  | 01h | ok  |  7.1 | 1200 Watts
Inlet Temp       | 02h | ok  | 55.1 | 24 degrees C
Fan1             | 04h | ok  | 29.1 | 8000 RPM
"""


def _app() -> typer.Typer:
    app = typer.Typer()
    register(app)
    return app


def _rows(lake: Path, dataset: str) -> list[dict]:
    if not (lake / dataset).exists():
        return []
    return ds.dataset(lake / dataset, format="parquet", partitioning="hive").to_table().to_pylist()


@pytest.fixture()
def fake_ipmitool(tmp_path, monkeypatch):
    """An `ipmitool` first on PATH that prints what a BMC answers (or fails like a dead one)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()

    def install(dead: bool = False) -> None:
        script = bin_dir / "ipmitool"
        if dead:
            # given up after ipmitool's session timeout (-N 1 with ipmi_timeout_s 2), as a BMC away
            # is; the same words at once are a BMC refusing the session (test_ipmi_session_refused.py)
            script.write_text("#!/bin/sh\nsleep 1.2\necho 'Error: Unable to establish IPMI v2 / RMCP+ session' >&2\n"
                              "exit 1\n")
        else:
            script.write_text("#!/bin/sh\ncase \"$*\" in\n"
                              f"  *'dcmi power reading'*) cat <<'EOF'\n{DCMI_OUTPUT}EOF\n;;\n"
                              f"  *'sdr elist'*) cat <<'EOF'\n{SDR_OUTPUT}EOF\n;;\n"
                              "  *) exit 1;;\nesac\n")
        script.chmod(0o755)

    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__IPMI_RETRIES", "0")
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__IPMI_TIMEOUT_S", "2")
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__IPMI_PASSWORD", "s3cret")
    return install


def test_nvml_that_cannot_start_exits_3_with_one_line(nvml_stub, tmp_path):
    nvml_stub.write([GpuState.h100(0)], errors={"nvmlInitWithFlags": "DRIVER_NOT_LOADED"})
    out = CliRunner().invoke(_app(), ["--source", "nvml", "--lake", str(tmp_path / "lake"), "--max-polls", "3"])
    assert out.exit_code == 3
    assert out.output.strip().splitlines() == [out.output.strip()]
    assert "NVML" in out.output and "cannot start" in out.output and "Driver Not Loaded" in out.output


def test_nvml_rows_through_the_real_pynvml(nvml_stub, tmp_path):
    nvml_stub.write([GpuState.h100(0, power_mw=250_500), GpuState.a100(1)])
    lake = tmp_path / "lake"
    out = CliRunner().invoke(_app(), ["--source", "nvml", "--lake", str(lake), "--host", "node-02",
                                      "--interval", "10ms", "--max-polls", "3"])
    assert out.exit_code == 0, out.output
    rows = _rows(lake, "gpu_samples")
    assert len(rows) == 6
    assert {r["power_w"] for r in rows if r["gpu_index"] == 0} == {250.5}


def test_ipmi_is_read_on_its_own_interval_into_node_samples(fake_ipmitool, tmp_path):
    fake_ipmitool()
    lake = tmp_path / "lake"
    out = CliRunner().invoke(_app(), ["--source", "sim", "--source", "ipmi", "--lake", str(lake), "--host", "node-04",
                                      "--interval", "10ms", "--ipmi-interval", "1h", "--sim-gpus", "2",
                                      "--max-polls", "20"])
    assert out.exit_code == 0, out.output
    node = _rows(lake, "node_samples")
    assert len(node) == 1  # one read at start, the next not due for an hour
    assert (node[0]["power_w"], node[0]["sdr_power_w"], node[0]["inlet_temp_c"]) == (1150.0, 1200.0, 24.0)
    assert node[0]["host"] == "node-04"
    assert len(_rows(lake, "gpu_samples")) == 40


def test_a_dead_bmc_is_marked_and_the_gpu_source_goes_on(fake_ipmitool, tmp_path):
    fake_ipmitool(dead=True)
    lake = tmp_path / "lake"
    out = CliRunner().invoke(_app(), ["--source", "sim", "--source", "ipmi", "--lake", str(lake),
                                      "--interval", "10ms", "--sim-gpus", "2", "--max-polls", "10"])
    assert out.exit_code == 0, out.output
    assert len(_rows(lake, "gpu_samples")) == 20
    [node] = _rows(lake, "node_samples")
    assert node["power_w"] is None and "gave no answer" in node["error"]


def test_a_dead_bmc_counts_as_a_source_error_in_the_closing_line_and_the_metric(fake_ipmitool, tmp_path):
    """IPMI never raises for a dead BMC (its row keeps the reason), so the collector said
    "0 source errors" and the fleet's source-error alert never fired."""
    fake_ipmitool(dead=True)
    lake, textfile = tmp_path / "lake", tmp_path / "collect.prom"
    out = CliRunner().invoke(_app(), ["--source", "sim", "--source", "ipmi", "--lake", str(lake), "--interval", "10ms",
                                      "--ipmi-interval", "1h", "--sim-gpus", "2", "--max-polls", "10",
                                      "--metrics-textfile", str(textfile)])
    assert out.exit_code == 0, out.output  # the GPUs were read
    assert "1 source errors" in out.output
    assert 'joulehouse_collector_source_errors_total{source="ipmi"} 1.0' in textfile.read_text()
    [node] = _rows(lake, "node_samples")  # the row stays, with its reason
    assert node["power_w"] is None and "gave no answer" in node["error"]


def test_an_ipmi_only_check_without_ipmitool_says_no_source_could_be_read(tmp_path, monkeypatch):
    """Every read of the only source carried an error: exit 3 as a DCGM-only check with
    Prometheus down does, not "stopped: ... 0 source errors" and exit 0."""
    (tmp_path / "empty-bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no ipmitool anywhere
    lake = tmp_path / "lake"
    out = CliRunner().invoke(_app(), ["--source", "ipmi", "--lake", str(lake), "--interval", "10ms",
                                      "--ipmi-interval", "1h", "--max-polls", "10"])
    assert out.exit_code == 3, out.output
    assert out.output.strip() == "error: no source could be read (see the log above)"
    [node] = _rows(lake, "node_samples")
    assert node["power_w"] is None and "ipmitool is not installed" in node["error"]


class _ErrorRows:
    """A source that never raises and marks the rows it could not read (as IPMI and NVML do)."""

    dataset = "node_samples"

    def __init__(self, errors: list[str | None]):
        self.errors = errors

    def read(self) -> pa.Table:
        n = len(self.errors)
        return pa.table({"sampled_at": pa.array([1_000_000] * n, pa.timestamp("us", tz="UTC")),
                         "host": [f"node-{i}" for i in range(n)], "source": ["test"] * n,
                         "error": pa.array(self.errors, pa.string())})

    def close(self) -> None:
        pass


@pytest.mark.parametrize(("errors", "failed"), [(["BMC gave no answer"], True), (["lost", "lost"], True),
                                                (["lost", None], False), ([None], False), ([], False)])
def test_a_read_fails_when_every_row_carries_an_error_and_its_rows_are_kept(tmp_path, errors, failed):
    """One device lost among others is a read (the others were read); every row marked is not."""
    settings = CollectorSettings(interval_s=1.0, spool_flush_interval_s=60, roll_interval_s=60)
    c = Collector([_ErrorRows(errors)], lake=tmp_path / "lake", settings=settings, spool_dir=tmp_path / "spool")
    c.poll()
    assert (c.stats.source_errors, c.stats.reads_ok) == ((1, 0) if failed else (0, 1))
    assert c.stats.errors_by_source == ({"_errorrows": 1} if failed else {})
    assert c.stats.rows == len(errors)


def test_a_required_sources_first_read_with_every_row_failed_counts_as_a_source_error(tmp_path):
    """NVML that starts with every GPU lost answers (the run goes on: a GPU may come back), but
    that read is a failed one, as it is on any later poll."""
    settings = CollectorSettings(interval_s=1.0, spool_flush_interval_s=60, roll_interval_s=60)
    c = Collector([Scheduled(_ErrorRows(["lost", "lost"]), required=True)], lake=tmp_path / "lake",
                  settings=settings, spool_dir=tmp_path / "spool")
    c.poll()
    assert (c.stats.source_errors, c.stats.reads_ok, c.stats.rows) == (1, 0, 2)
    assert c.stats.errors_by_source == {"_errorrows": 1}


# node-07's series by any spelling of its name (collectors.sources.host_names), as PromQL reads it
HOST_SELECTOR = 'Hostname=~"(?i)node-07(\\\\..*)?"'


class _FakePrometheus(BaseHTTPRequestHandler):
    """One GPU of node-07 scraped every 30 s: power = (timestamp mod 1000) / 10 W. Answers time(),
    the source's probe for the host's label (a count, for series labelled Hostname) and the raw
    samples query `selector[Ns]` at `time`; records each query."""

    queries: list[str] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        url = urllib.parse.urlparse(self.path)
        params = urllib.parse.parse_qs(url.query)
        self.queries.append(params["query"][0])
        if params["query"][0] == "time()":  # Prometheus' clock
            now = time.time()
            data = {"resultType": "scalar", "result": [now, str(now)]}
        elif params["query"][0].startswith("count("):  # which label names the host
            found = HOST_SELECTOR in params["query"][0]
            data = {"resultType": "vector", "result": [{"metric": {}, "value": [time.time(), "1"]}] if found else []}
        else:
            end = int(float(params["time"][0]))
            start = end - int(params["query"][0].rsplit("[", 1)[1].removesuffix("s]"))
            labels = {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": "0", "UUID": "GPU-dcgm-0",
                      "modelName": "NVIDIA H200", "Hostname": "node-07"}
            values = [[t, str((t % 1000) / 10)] for t in range(-(-start // 30) * 30, end + 1, 30)]
            data = {"resultType": "matrix", "result": [{"metric": labels, "values": values}]}
        body = json.dumps({"status": "success", "data": data}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def fake_prometheus():
    _FakePrometheus.queries = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakePrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_dcgm_sync_writes_this_hosts_range_beside_the_gpu_rows(fake_prometheus, tmp_path, monkeypatch):
    for key, value in {"PROMETHEUS_URL": fake_prometheus, "DCGM_SETTLE_S": "0", "PROMETHEUS_STEP_S": "30",
                       "DCGM_INITIAL_LOOKBACK_S": "120"}.items():
        monkeypatch.setenv(f"JOULEHOUSE_COLLECTOR__{key}", value)
    lake = tmp_path / "lake"
    out = CliRunner().invoke(_app(), ["--source", "sim", "--source", "dcgm", "--lake", str(lake), "--host", "node-07",
                                      "--interval", "10ms", "--sim-gpus", "2", "--max-polls", "10"])
    assert out.exit_code == 0, out.output
    rows = _rows(lake, "gpu_samples")
    dcgm = [r for r in rows if r["source"] == "dcgm"]
    assert 4 <= len(dcgm) <= 5  # the 30 s scrapes of the 120 s lookback
    assert [r["power_w"] for r in dcgm] == pytest.approx([(r["sampled_at"].timestamp() % 1000) / 10 for r in dcgm])
    assert len([r for r in rows if r["source"] == "sim"]) == 20
    # the stop line counts what DCGM wrote itself beside the spool's rows (it said "20 rows")
    files = len(list(lake.rglob("*.parquet")))
    assert f"stopped: 10 polls, {len(rows)} rows, {files} files," in out.output
    ranges = [q for q in _FakePrometheus.queries if q != "time()" and not q.startswith("count(")]
    assert ranges and all(HOST_SELECTOR in q for q in ranges)  # a node reads only its own series
    watermark = json.loads((tmp_path / "state" / "dcgm-watermark.json").read_text())
    assert watermark["pending"] is None and watermark["watermark_at"]


def test_prometheus_down_is_logged_and_the_gpu_source_goes_on(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__PROMETHEUS_URL", "http://127.0.0.1:9")  # discard port: refused
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__PROMETHEUS_RETRIES", "0")
    lake = tmp_path / "lake"
    out = CliRunner().invoke(_app(), ["--source", "sim", "--source", "dcgm", "--lake", str(lake),
                                      "--interval", "10ms", "--sim-gpus", "2", "--max-polls", "10"])
    assert out.exit_code == 0, out.output
    assert len(_rows(lake, "gpu_samples")) == 20
    assert "did not answer time()" in caplog.text  # the first thing a sync asks


def test_bad_settings_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__IPMI_INTERVAL_S", "often")
    out = CliRunner().invoke(_app(), ["--source", "sim", "--lake", str(tmp_path / "lake")])
    assert out.exit_code == 2 and "ipmi_interval_s" in out.output


class _Counting:
    dataset = "gpu_samples"

    def __init__(self, release: threading.Event | None = None, after: int = 0):
        self.reads, self.release, self.after = 0, release, after

    def read(self) -> pa.Table:
        self.reads += 1
        if self.release is not None and self.reads == self.after:
            self.release.set()
        return pa.table({"sampled_at": pa.array([self.reads * 1_000_000], pa.timestamp("us", tz="UTC")),
                         "host": ["node-01"], "gpu_index": pa.array([0], pa.int16()), "gpu_uuid": ["GPU-x"],
                         "source": ["test"]})

    def close(self) -> None:
        pass


class _Stuck:
    """A background source whose read blocks until released (a BMC that does not answer)."""

    dataset = "node_samples"

    def __init__(self, release: threading.Event):
        self.release, self.entered, self.timed_out = release, threading.Event(), False

    def read(self) -> pa.Table:
        self.entered.set()
        # Were this read in the GPU loop, the GPU polls that release it could never happen.
        self.timed_out = not self.release.wait(30)
        raise SourceError("BMC gave no answer")

    def close(self) -> None:
        pass


def test_a_stuck_background_source_does_not_delay_gpu_polls(tmp_path):
    release = threading.Event()
    stuck = _Stuck(release)
    gpu = _Counting(release, after=25)  # frees the stuck source only once 25 GPU polls are done
    settings = CollectorSettings(interval_s=0.01, spool_flush_interval_s=60, roll_interval_s=60)
    c = Collector([Scheduled(gpu), Scheduled(stuck, interval_s=5.0, background=True)],
                  lake=tmp_path / "lake", settings=settings, spool_dir=tmp_path / "spool")
    stats = c.run(threading.Event(), max_polls=30)
    assert stuck.entered.is_set() and not stuck.timed_out
    assert gpu.reads == 30 and stats.rows == 30
    assert stats.source_errors == 1  # the stuck read's failure was counted once it returned
