"""The DCGM source against a real Prometheus (Debian's /usr/bin/prometheus) scraping a local
endpoint that serves dcgm-exporter's text format for 2 hosts x 4 GPUs with known values."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.dataset as ds
import pytest
import requests

from joulehouse.collectors.sources import dcgm as dcgm_module
from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.dcgm import DcgmSource
from prometheus_server import PROMETHEUS, PrometheusServer, TextEndpoint, wait_for

pytestmark = [pytest.mark.integration]
if not Path(PROMETHEUS).exists():
    pytest.skip(f"{PROMETHEUS} is not installed (Debian package 'prometheus')", allow_module_level=True)

# dcgm-exporter's HELP/TYPE lines, as its counters file declares them.
HELP = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "Memory temperature (in C)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "Total energy consumption since boot (in mJ)."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %)."),
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": ("gauge", "Power management limit (in W)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": ("gauge", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)."),
    "DCGM_FI_PROF_SM_ACTIVE": ("gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("gauge", "The ratio of number of warps resident on an SM."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", "Ratio of cycles the device memory interface is active sending or receiving data."),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gauge", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gauge", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second."),
}
HOSTS = {"node-01": "NVIDIA A100-SXM4-80GB", "node-02": "NVIDIA H100 80GB HBM3"}


def gpu_uuid(host: str, index: int) -> str:
    return f"GPU-{int(host[-2:]):08x}-0000-4000-8000-{index:012x}"


def known_values(host: str, index: int, power_offset_w: float = 0.0) -> dict[str, float | None]:
    """The readings one GPU publishes, in dcgm-exporter units (float32-exact). None: the
    exporter publishes no series for it (profiling fields off on node-02 GPU 3, and the power
    limit field only on node-01)."""
    h = int(host[-2:])
    values: dict[str, float | None] = {
        "DCGM_FI_DEV_POWER_USAGE": 100.0 * h + 10.0 * index + 0.5 + power_offset_w,
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": 9_000_000_000.0 + 1_000_000 * h + index,
        "DCGM_FI_DEV_SM_CLOCK": 1000.0 + 100 * h + index,
        "DCGM_FI_DEV_MEM_CLOCK": 1593.0,
        "DCGM_FI_DEV_GPU_TEMP": 40.0 + index,
        "DCGM_FI_DEV_MEMORY_TEMP": 50.0 + index,
        "DCGM_FI_DEV_GPU_UTIL": 10.0 * index,
        "DCGM_FI_DEV_MEM_COPY_UTIL": 5.0 * index,
        "DCGM_FI_PROF_SM_ACTIVE": 0.125 * index,
        "DCGM_FI_PROF_SM_OCCUPANCY": 0.0625 * index,
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 0.25,
        "DCGM_FI_PROF_DRAM_ACTIVE": 0.5,
        "DCGM_FI_PROF_PCIE_TX_BYTES": 1_000_000.0 * (index + 1),
        "DCGM_FI_PROF_PCIE_RX_BYTES": 2_000_000.0 * (index + 1),
        "DCGM_FI_DEV_POWER_MGMT_LIMIT": 400.0 if host == "node-01" else None,
        "DCGM_FI_DEV_FB_USED": 1024.0 * (10 * h + index),
        "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": float(0x2 | 0x4) if index == 1 else 0.0,
    }
    if host == "node-02" and index == 3:
        for name in values:
            if name.startswith("DCGM_FI_PROF_"):
                values[name] = None
    return values


def exposition(power_offset_w: float) -> str:
    """dcgm-exporter's text format (HELP, TYPE, then one line per GPU with its label set)."""
    lines = []
    for name, (kind, help_text) in HELP.items():
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for host, model in HOSTS.items():
            for index in range(4):
                value = known_values(host, index, power_offset_w)[name]
                if value is None:
                    continue
                text = f"{value:.6f}" if value != int(value) else f"{int(value)}"
                lines.append(
                    f'{name}{{gpu="{index}",UUID="{gpu_uuid(host, index)}",'
                    f'pci_bus_id="00000000:{0x18 + index:02X}:00.0",device="nvidia{index}",'
                    f'modelName="{model}",Hostname="{host}",DCGM_FI_DRIVER_VERSION="550.54.15"}} {text}')
    return "\n".join(lines) + "\n"


class Exporter(TextEndpoint):
    """dcgm-exporter's stand-in; `power_offset_w` changes what it serves."""

    def __init__(self) -> None:
        self.power_offset_w = 0.0
        super().__init__(lambda: exposition(self.power_offset_w))


@pytest.fixture(scope="module")
def exporter() -> Iterator[Exporter]:
    server = Exporter()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def prometheus(exporter: Exporter, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), exporter.port)
    try:
        # The first scrape is queryable about 5 s after start, whatever the interval: poll.
        wait_for(lambda: server.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 8, 30,
                 "the first scrape of 8 GPUs")
        # Range queries evaluate at whole seconds; only instants after this scrape have values.
        server.first_scrape_s = server.series_count("min(timestamp(DCGM_FI_DEV_POWER_USAGE))") + 1
        yield server
    finally:
        server.stop()


def source(prometheus: PrometheusServer, tmp_path: Path, **kw: object) -> DcgmSource:
    kw.setdefault("step_s", 1)
    kw.setdefault("state_path", tmp_path / "state" / "dcgm.json")
    return DcgmSource(tmp_path / "lake", url=prometheus.url, **kw)


def lake_rows(lake: Path) -> list[dict]:
    return ds.dataset(lake / "gpu_samples", format="parquet", partitioning="hive").to_table().to_pylist()


def test_lake_holds_exactly_the_exported_values_with_null_for_absent_series(prometheus, tmp_path):
    start = prometheus.first_scrape_s
    wait_for(lambda: time.time() > start + 3, 10, "two scrapes after the first")
    src = source(prometheus, tmp_path)
    table = src.read_range(start, start + 2)
    rows = table.to_pylist()
    assert len(rows) == 8 * 3, "one row per GPU and scrape"
    assert {(r["host"], r["gpu_index"]) for r in rows} == {(h, i) for h in HOSTS for i in range(4)}
    assert src.rejected_series == []
    for r in rows:
        expected = known_values(r["host"], r["gpu_index"])
        assert r["gpu_uuid"] == gpu_uuid(r["host"], r["gpu_index"])
        assert r["gpu_model"] == HOSTS[r["host"]]
        assert r["source"] == "dcgm"
        for name, (column, _) in dcgm_module.FIELDS.items():
            assert r[column] == expected[name], (r["host"], r["gpu_index"], column)
    # Units survive as dcgm-exporter gives them: W, mJ counter, ratios 0..1, bytes/s, MiB.
    h1 = next(r for r in rows if r["host"] == "node-01" and r["gpu_index"] == 2)
    assert (h1["power_w"], h1["energy_mj_total"], h1["sm_active_ratio"], h1["pcie_rx_bytes_per_s"],
            h1["mem_used_mib"]) == (120.5, 9_001_000_002, 0.25, 6_000_000, 12_288)
    absent = next(r for r in rows if r["host"] == "node-02" and r["gpu_index"] == 3)
    assert absent["sm_active_ratio"] is None and absent["pcie_tx_bytes_per_s"] is None
    assert absent["power_limit_w"] is None and absent["power_w"] == 230.5
    # The server's own clock, which the sync trusts over a node clock that runs ahead.
    assert abs(src._server_now_s() - time.time()) < 5


def test_watermark_resumes_without_duplicates_or_gaps_even_after_a_crash(prometheus, exporter, tmp_path, monkeypatch):
    wait_for(lambda: time.time() > prometheus.first_scrape_s + 5, 10, "a few scrapes")
    src = source(prometheus, tmp_path, settle_s=1, initial_lookback_s=3)
    first = src.sync()
    assert first, "the first sync wrote no file"
    watermark = src.state.load()["watermark_at"]

    # Crash after the range's files are written but before the watermark moves.
    exporter.power_offset_w = 1.0
    wait_for(lambda: prometheus.series_count(
        'count(DCGM_FI_DEV_POWER_USAGE{Hostname="node-01",gpu="0"} == 101.5)') == 1, 15, "a scrape of the new power")
    wait_for(lambda: time.time() > dcgm_module._epoch(watermark) + 4, 10, "newer scrapes")
    real_write = dcgm_module.write_range

    def write_then_crash(*args, **kwargs):
        real_write(*args, **kwargs)
        raise KeyboardInterrupt("simulated crash between the write and the watermark")

    monkeypatch.setattr(dcgm_module, "write_range", write_then_crash)
    with pytest.raises(KeyboardInterrupt):
        src.sync()
    state = src.state.load()
    assert state["watermark_at"] == watermark and state["pending"] is not None
    monkeypatch.setattr(dcgm_module, "write_range", real_write)
    src.sync()

    rows = lake_rows(tmp_path / "lake")
    keys = [(r["gpu_uuid"], r["sampled_at"]) for r in rows]
    assert len(keys) == len(set(keys)), "a timestamp was written twice"
    for uuid in {r["gpu_uuid"] for r in rows}:
        stamps = sorted(r["sampled_at"].timestamp() for r in rows if r["gpu_uuid"] == uuid)
        # One row per 1 s scrape, at the scrape's own time (within its jitter).
        assert all(0.5 < b - a < 1.5 for a, b in zip(stamps, stamps[1:])), "a range was skipped"
    assert src.state.load()["pending"] is None
    assert src.state.load()["watermark_at"] > watermark
    powers = {r["power_w"] for r in rows if r["gpu_uuid"] == gpu_uuid("node-01", 0)}
    assert {100.5, 101.5} <= powers, "the second range did not carry the new readings"


def test_prometheus_stopped_gives_a_clear_error_after_bounded_retries(exporter, tmp_path):
    server = PrometheusServer(tmp_path / "prom-stopped", exporter.port)
    server.stop()
    sleeps: list[float] = []
    src = DcgmSource(tmp_path / "lake", url=server.url, step_s=1, state_path=tmp_path / "s.json",
                     retries=2, backoff_s=0.5, timeout_s=2, sleep=sleeps.append)
    now = int(time.time())
    with pytest.raises(SourceError, match=r"did not answer the samples query for .* after 3 attempts"):
        src.read_range(now - 10, now)
    assert sleeps == [0.5, 1.0]
    with pytest.raises(SourceError):
        src.sync()
    assert not (tmp_path / "lake").exists(), "a failed range must not write anything"
    assert src.state.load()["watermark_at"] is None


def raw_sample_times(server: PrometheusServer, at_s: float, window_s: int) -> dict[str, list[float]]:
    """Prometheus' own record of the power samples in [at_s - window_s, at_s]: GPU uuid -> times."""
    answer = requests.get(f"{server.url}/api/v1/query", timeout=5, params={
        "query": f"DCGM_FI_DEV_POWER_USAGE[{window_s}s]", "time": at_s}).json()
    return {m["metric"]["UUID"]: [float(t) for t, _ in m["values"]] for m in answer["data"]["result"]}


def test_no_rows_while_prometheus_was_not_scraping_and_each_row_at_its_scrape_time(exporter, tmp_path):
    """Prometheus stopped (SIGSTOP) for 6 s writes no staleness markers, and a range query would
    repeat the last sample at every step of the gap (the trial's invented readings). The lake
    holds exactly the samples Prometheus scraped, at their timestamps, none in the gap."""
    server = PrometheusServer(tmp_path / "prometheus", exporter.port)
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 8, 30, "the first scrape")
        first_s = server.series_count("min(timestamp(DCGM_FI_DEV_POWER_USAGE))")
        src = source(server, tmp_path, settle_s=1, initial_lookback_s=time.time() - first_s + 5)
        wait_for(lambda: time.time() > first_s + 3, 10, "a few scrapes")
        src.sync()  # a range before the gap: the second must neither repeat nor skip its samples
        stopped_s, resumed_s = server.pause_scrapes(6)
        wait_for(lambda: server.series_count("min(timestamp(DCGM_FI_DEV_POWER_USAGE))") > resumed_s + 3, 15,
                 "scrapes after the gap")
        time.sleep(1.5)  # past settle_s
        src.sync()
        watermark_s = dcgm_module._epoch(src.state.load()["watermark_at"])
        scraped = raw_sample_times(server, watermark_s, int(watermark_s - first_s) + 10)
    finally:
        server.stop()
    rows = lake_rows(tmp_path / "lake")
    assert len(scraped) == 8 and rows
    assert watermark_s > resumed_s + 1, "the second range did not reach past the gap"
    in_gap = [r for r in rows if stopped_s + 0.05 < r["sampled_at"].timestamp() < resumed_s - 0.05]
    assert not in_gap, f"{len(in_gap)} rows while Prometheus was not scraping"
    for uuid, times in scraped.items():
        lake = sorted(round(r["sampled_at"].timestamp(), 3) for r in rows if r["gpu_uuid"] == uuid)
        assert lake == [round(t, 3) for t in times], f"{uuid}: the lake's rows are not the scrapes"


def _node_collector_reads(tmp_path: Path, labels: str, host: str) -> tuple[list[dict], str]:
    """A real Prometheus scraping two GPUs' power with `labels` (besides gpu, UUID, modelName), and
    the node collector of `host` as `joulehouse collect --source dcgm` builds it, synced once:
    (the rows it wrote, its query)."""
    from joulehouse.cli.collect import _build_sources
    from joulehouse.collectors.settings import CollectorSettings

    def two_gpus() -> str:
        return "".join(f'DCGM_FI_DEV_POWER_USAGE{{gpu="{i}",UUID="GPU-{i}",modelName="NVIDIA H100 80GB HBM3"{labels}}} '
                       f"{100 + i}\n" for i in range(2))

    exporter = TextEndpoint(two_gpus)
    server = PrometheusServer(tmp_path / "prometheus", exporter.port)
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 2, 30, "the first scrape")
        settings = CollectorSettings(prometheus_url=server.url, prometheus_step_s=1, dcgm_settle_s=0)
        [entry] = _build_sources(["dcgm"], host, tmp_path / "lake", settings, 0, CollectorSettings())
        time.sleep(2)
        entry.source.sync()
        return lake_rows(tmp_path / "lake"), entry.source.query
    finally:
        server.stop()
        exporter.stop()


def test_the_node_collector_finds_its_series_whichever_label_names_the_host(tmp_path):
    """dcgm-exporter names the host `Hostname`, `hostname` or only `instance`, by deployment. The
    node's default selected `Hostname` alone: a `hostname` deployment gave no row, said nothing,
    and the watermark moved past its samples for good."""
    rows, query = _node_collector_reads(tmp_path, ',hostname="node-07"', "node-07")
    assert {r["gpu_uuid"] for r in rows} == {"GPU-0", "GPU-1"} and all(r["host"] == "node-07" for r in rows)
    assert 'hostname=~"(?i)node-07(\\\\..*)?"' in query


def test_a_node_named_with_capitals_and_a_domain_reads_what_the_exporter_labels_in_lowercase(tmp_path):
    """A node whose uname is NODE-07.cluster.example.com, under a kubelet that lowercases the
    name dcgm-exporter labels (NODE_NAME): by Hostname="NODE-07.cluster.example.com" it read
    none of its own GPUs' series. Every spelling of the host is matched, and its rows are the
    lake's one name for the server."""
    rows, _ = _node_collector_reads(tmp_path, ',Hostname="node-07"', "NODE-07.cluster.example.com")
    assert {r["gpu_uuid"] for r in rows} == {"GPU-0", "GPU-1"} and all(r["host"] == "node-07" for r in rows)


def test_a_host_named_with_dots_and_dashes_found_by_its_instance_label_is_read(tmp_path):
    """The instance fallback escaped the host with Python's re.escape ('gpu\\-node\\-01'), which
    PromQL's Go-style strings refuse: every sync of a deployment labelling the host only by its
    instance (and every links sync) failed with HTTP 400 (review, helper-92). The exporter's
    instance label here is 127.0.0.1:<port>: a name with dots, found by the regex."""
    rows, query = _node_collector_reads(tmp_path, "", "127.0.0.1")
    assert {r["gpu_uuid"] for r in rows} == {"GPU-0", "GPU-1"}
    assert 'instance=~"127\\\\.0\\\\.0\\\\.1(:[0-9]+)?"' in query


def test_an_exporter_that_relabels_its_host_is_still_read(tmp_path):
    """The selector found first was kept for good: an exporter redeployed with `Hostname` where it
    said `hostname` was read as empty ever after, the watermark moving past every sample (review,
    helper-92). A range whose series stop early has the other labels probed, and theirs added."""
    from joulehouse.cli.collect import _host_selectors

    label = {"name": "hostname"}

    def exposition_now() -> str:
        labels = f'gpu="0",UUID="GPU-rl",modelName="NVIDIA H100 80GB HBM3",{label["name"]}="node-09"'
        return f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} 250\n"

    exporter = TextEndpoint(exposition_now)
    server = PrometheusServer(tmp_path / "prometheus", exporter.port)
    try:
        wait_for(lambda: server.series_count("count(DCGM_FI_DEV_POWER_USAGE)") == 1, 30, "the first scrape")
        src = DcgmSource(tmp_path / "lake", url=server.url, step_s=1, settle_s=2, initial_lookback_s=20,
                         state_path=tmp_path / "state.json", selector_candidates=_host_selectors("node-09")[:2])
        time.sleep(3)
        src.sync()
        label["name"] = "Hostname"
        switched = time.time()
        wait_for(lambda: server.series_count('count(DCGM_FI_DEV_POWER_USAGE{Hostname="node-09"})') == 1, 30,
                 "a scrape under the new label")
        time.sleep(6)
        src.sync()
        after = [r for r in lake_rows(tmp_path / "lake") if r["sampled_at"].timestamp() > switched + 1]
        assert after and 'Hostname=~' in src.query
    finally:
        server.stop()
        exporter.stop()
