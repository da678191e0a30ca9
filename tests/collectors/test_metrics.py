"""The node side's own metrics: what the collector, ship and the agent expose is what they did."""

from __future__ import annotations

import datetime as dt
import time

import pyarrow as pa
import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.agent_loop import AgentState, run_agent
from joulehouse.collectors.collect import Collector
from joulehouse.collectors.config_contract import dump_config, sign_config
from joulehouse.collectors.metrics import METRIC_NAMES, AgentStateMetrics, CollectorStatsMetrics, MetricsExposure
from joulehouse.collectors.settings import CollectorSettings
from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.sim import SimSource
from joulehouse.collectors.writer import write_dataset
from nvml_stub.fixture import GpuState

NOW = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """{(sample name, sorted labels): value} of a Prometheus text exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def scrape(registry: CollectorRegistry) -> dict[tuple[str, tuple], float]:
    return samples(generate_latest(registry).decode())


class Broken:
    dataset = "gpu_samples"

    def read(self):
        raise SourceError("broken: the device is gone")

    def close(self):
        pass


class FakeClock:
    def __init__(self):
        self.t = 1_767_225_600.0

    def __call__(self):
        return self.t


def test_collector_metrics_say_what_each_source_wrote_and_what_waits(tmp_path, lake):
    clock = FakeClock()
    settings = CollectorSettings(interval_s=1.0, spool_flush_interval_s=100.0, roll_interval_s=1000.0)
    collector = Collector([SimSource("node-01", gpus=4, clock=clock), Broken()], lake=lake, settings=settings,
                          spool_dir=tmp_path / "spool", clock=clock)
    registry = CollectorRegistry()
    registry.register(CollectorStatsMetrics(collector))
    for _ in range(6):
        collector.poll()
        clock.t += 1.0
    before = scrape(registry)
    assert before[("joulehouse_collector_readings_spooled_total", (("dataset", "gpu_samples"), ("source", "sim")))] == 24
    assert before[("joulehouse_collector_source_errors_total", (("source", "broken"),))] == 6
    assert before[("joulehouse_collector_spool_backlog_rows", ())] == 24
    assert before[("joulehouse_collector_lake_files_written_total", ())] == 0
    assert ("joulehouse_collector_last_lake_write_timestamp_seconds", ()) not in before  # never: absent, not 0
    started = time.time()
    collector.flush()
    after = scrape(registry)
    assert after[("joulehouse_collector_spool_backlog_rows", ())] == 0
    assert after[("joulehouse_collector_lake_files_written_total", ())] == 1
    assert started <= after[("joulehouse_collector_last_lake_write_timestamp_seconds", ())] <= time.time()
    assert after[("joulehouse_collector_polls_total", ())] == 6
    exported = {name.removesuffix("_total") for name, _ in after} | {name for name, _ in after}
    assert {name for name, _ in after} <= METRIC_NAMES | {n + "_created" for n in exported}


def test_the_textfile_holds_the_same_metrics_and_is_replaced_whole(tmp_path, lake):
    clock = FakeClock()
    collector = Collector([SimSource("node-01", gpus=2, clock=clock)], lake=lake, settings=CollectorSettings(),
                          spool_dir=tmp_path / "spool", clock=clock)
    registry = CollectorRegistry()
    registry.register(CollectorStatsMetrics(collector))
    textfile = tmp_path / "textfile" / "joulehouse_collect.prom"
    exposure = MetricsExposure(registry, textfile=textfile, interval_s=3600)
    collector.poll()
    exposure.stop()  # writes a last time
    written = samples(textfile.read_text())
    assert written[("joulehouse_collector_readings_spooled_total", (("dataset", "gpu_samples"), ("source", "sim")))] == 2
    assert [p.name for p in textfile.parent.iterdir()] == ["joulehouse_collect.prom"]  # no temporary left


def test_agent_metrics_count_applies_refusals_and_the_configs_age(nvml_stub, keys, lake, tmp_path):
    nvml_stub.write([GpuState.a100(0), GpuState.a100(1)])
    uuid0 = GpuState.a100(0).uuid
    body = {"schema_version": 1, "generated_at": "2026-01-03T06:00:00Z", "valid_from": "2026-01-03T06:00:00Z",
            "valid_until": "2026-01-05T06:00:00Z", "site": "site-a", "day": "2026-01-02",
            "hosts": {"node-01": {uuid0: {"gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput",
                                          "power_limit_w": 300.0, "locked_sm_clock_min_mhz": None,
                                          "locked_sm_clock_max_mhz": None, "expected_saving_pct": 10.0,
                                          "expected_slowdown_pct": 5.0}}},
            "excluded_gpu_models": []}
    location = tmp_path / "recommended-config.json"
    location.write_bytes(dump_config(sign_config(body, keys[0])))
    state = AgentState()
    registry = CollectorRegistry()
    registry.register(AgentStateMetrics(state, clock=lambda: NOW.timestamp() + 3600))
    run_agent(str(location), public_key=keys[1], host="node-01", nvml=pynvml, lake=lake, iterations=1,
              clock=lambda: NOW, sleep=lambda s: None, log=lambda m: None, state=state)
    tampered = dump_config(sign_config(body, keys[0])).replace(b"300.0", b"200.0")
    location.write_bytes(tampered)
    run_agent(str(location), public_key=keys[1], host="node-01", nvml=pynvml, lake=lake, iterations=1,
              clock=lambda: NOW, sleep=lambda s: None, log=lambda m: None, state=state)
    got = scrape(registry)
    assert got[("joulehouse_agent_gpu_actions_total", (("action", "apply"),))] == 1
    # The first config since start returns the GPUs it does not set to their defaults.
    assert got[("joulehouse_agent_gpu_actions_total", (("action", "unchanged"),))] == 1
    assert got[("joulehouse_agent_config_refusals_total", (("reason", "BadSignature"),))] == 1
    assert got[("joulehouse_agent_polls_total", ())] == 2
    assert got[("joulehouse_agent_config_in_force", ())] == 1
    assert got[("joulehouse_agent_config_age_seconds", ())] == 3600  # the scrape's clock minus valid_from


def test_ship_writes_its_runs_metrics_and_a_failed_run_keeps_the_last_success(tmp_path):
    node_lake = tmp_path / "node" / "lake"
    write_dataset(node_lake, "gpu_samples", pa.Table.from_pylist([
        {"sampled_at": NOW, "host": "node-01", "gpu_index": 0, "gpu_uuid": "GPU-0", "power_w": 100.0,
         "source": "nvml"}]))
    textfile = tmp_path / "textfile" / "joulehouse_ship.prom"
    out = CliRunner().invoke(app, ["ship", "--lake", str(node_lake), "--to", str(tmp_path / "central"),
                                   "--metrics-textfile", str(textfile)])
    assert out.exit_code == 0, out.output
    first = samples(textfile.read_text())
    assert first[("joulehouse_ship_files_shipped", ())] == 1 and first[("joulehouse_ship_pending_files", ())] == 0
    assert first[("joulehouse_ship_failed", ())] == 0
    success = first[("joulehouse_ship_last_success_timestamp_seconds", ())]
    write_dataset(node_lake, "gpu_samples", pa.Table.from_pylist([
        {"sampled_at": NOW + dt.timedelta(hours=1), "host": "node-01", "gpu_index": 0, "gpu_uuid": "GPU-0",
         "power_w": 100.0, "source": "nvml"}]))
    (tmp_path / "blocked").write_text("a file where the destination folder should be")
    failed = CliRunner().invoke(app, ["ship", "--lake", str(node_lake), "--to", str(tmp_path / "blocked" / "lake"),
                                      "--manifest", str(tmp_path / "other-manifest.jsonl"),
                                      "--metrics-textfile", str(textfile)])
    assert failed.exit_code != 0
    second = samples(textfile.read_text())
    assert second[("joulehouse_ship_failed", ())] == 1 and second[("joulehouse_ship_pending_files", ())] == 2
    assert second[("joulehouse_ship_last_success_timestamp_seconds", ())] == success
    assert second[("joulehouse_ship_last_run_timestamp_seconds", ())] >= success


def test_a_taken_metrics_port_is_refused_in_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = CliRunner().invoke(app, ["collect", "--source", "sim", "--lake", str(tmp_path / "lake"),
                                       "--max-polls", "1", "--metrics-port", str(port)])
    assert out.exit_code == 2 and f"--metrics-port {port}" in out.output
