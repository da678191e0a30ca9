"""DCGM source without a server: label mapping, value conversion, the exactly-once watermark
with a fake Prometheus, and the deployment files (counters file, scrape config) agreeing with
the fields the source reads."""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import time
from pathlib import Path

import pyarrow.dataset as ds
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lanes import examples

from joulehouse.collectors.sources import dcgm as dcgm_module
from joulehouse.collectors.sources.base import SourceError
from joulehouse.collectors.sources.dcgm import FIELD_ALIASES, FIELDS, DcgmSource, fields_query, pivot_range_result

REPO = Path(__file__).resolve().parents[3]
LABELS = {"gpu": "1", "UUID": "GPU-abc", "modelName": "NVIDIA H200", "Hostname": "node-03",
          "device": "nvidia1", "pci_bus_id": "00000000:19:00.0", "DCGM_FI_DRIVER_VERSION": "550.54.15"}


def series(name: str, values: list[tuple[float, str]], **labels: str) -> dict:
    return {"metric": {"__name__": name, **LABELS, **labels}, "values": [[t, v] for t, v in values]}


def test_labels_map_to_lake_keys_and_absent_or_nan_readings_are_null():
    table, rejected = pivot_range_result([
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "312.5"), (101, "NaN")]),
        series("DCGM_FI_PROF_SM_ACTIVE", [(100, "0.75")]),
        series("DCGM_FI_DEV_GPU_TEMP", [(100, "61")], Hostname="", hostname="node-03b"),
    ])
    rows = table.to_pylist()
    assert rejected == []
    by_host = {(r["host"], r["sampled_at"].timestamp()): r for r in rows}
    first = by_host[("node-03", 100.0)]
    assert (first["gpu_index"], first["gpu_uuid"], first["gpu_model"]) == (1, "GPU-abc", "NVIDIA H200")
    assert (first["power_w"], first["sm_active_ratio"], first["temp_c"]) == (312.5, 0.75, None)
    assert by_host[("node-03", 101.0)]["power_w"] is None  # "NaN" is no reading, not 0
    assert by_host[("node-03b", 100.0)]["temp_c"] == 61.0  # lower-case hostname label


def test_an_exporter_before_dcgm_3_3_gives_clock_event_reasons_under_its_old_name():
    # DCGM < 3.3 exports field 112 as DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: a GPU capped there
    # must still carry its power-cap bit (0x4), or the models take it for uncapped.
    assert re.search(r"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS(\||\")", fields_query())
    table, rejected = pivot_range_result([
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "650")]),
        series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", [(100, "4")]),
    ])
    assert rejected == []
    assert [(r["power_w"], r["clock_event_reasons"]) for r in table.to_pylist()] == [(650.0, 4)]


def test_framebuffer_used_lands_as_mem_used_mib_unconverted():
    # dcgm-exporter publishes DCGM_FI_DEV_FB_USED in MiB, the lake's unit (an H200 holds 143,771).
    counters = (REPO / "infra" / "dcgm-exporter" / "counters.csv").read_text()
    assert re.search(r"^DCGM_FI_DEV_FB_USED, gauge, .*\(in MiB\)", counters, re.M)
    table, rejected = pivot_range_result([
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "650"), (101, "655")]),
        series("DCGM_FI_DEV_FB_USED", [(100, "81920"), (101, "NaN")]),
    ])
    assert rejected == []
    assert [(r["power_w"], r["mem_used_mib"]) for r in table.to_pylist()] == [(650.0, 81_920), (655.0, None)]


def test_series_that_cannot_be_keyed_are_set_aside_with_a_reason():
    _, rejected = pivot_range_result([
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "1")], UUID=""),
        series("DCGM_FI_PROF_SM_ACTIVE", [(100, "0.5")], GPU_I_ID="3"),  # one MIG instance's own activity
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "watts")]),
    ])
    assert len(rejected) == 3
    assert "UUID" in rejected[0] and "MIG" in rejected[1] and "not a number" in rejected[2]


def test_a_mig_gpus_device_readings_are_read_once_from_its_instances_series():
    """With MIG on, dcgm-exporter gives every field once per instance (GPU_I_ID), the device's power
    and energy counter included, the same in each: all were set aside, and the GPU's whole energy
    left the lake. Per-instance fields (activity) stay aside: a GPU's value is not theirs."""
    mig = [series(name, [(100, value)], GPU_I_ID=i, GPU_I_PROFILE=p)
           for i, p in (("1", "3g.40gb"), ("2", "4g.40gb"))
           for name, value in (("DCGM_FI_DEV_POWER_USAGE", "310.0"), ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "987654321"),
                               ("DCGM_FI_PROF_SM_ACTIVE", "0.25"))]
    table, rejected = pivot_range_result(mig)
    assert table.select(["gpu_uuid", "power_w", "energy_mj_total", "sm_active_ratio"]).to_pylist() == [
        {"gpu_uuid": "GPU-abc", "power_w": 310.0, "energy_mj_total": 987654321, "sm_active_ratio": None}]
    assert len(rejected) == 2 and all("DCGM_FI_PROF_SM_ACTIVE" in r and "MIG" in r for r in rejected)


def test_dcgm_no_value_sentinels_are_null_and_the_rest_of_the_reading_is_kept():
    # Older exporters publish DCGM's blank / not-supported sentinels as numbers: an int64 one
    # does not fit the lake's int64 column, and as a value it would be 2^63 bytes per second.
    table, rejected = pivot_range_result([
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "350.5")]),
        series("DCGM_FI_PROF_PCIE_TX_BYTES", [(100, "9223372036854775792")]),  # INT64_BLANK
        series("DCGM_FI_DEV_SM_CLOCK", [(100, "2147483634")]),  # INT32_NOT_SUPPORTED
        series("DCGM_FI_DEV_POWER_MGMT_LIMIT", [(100, "140737488355328")]),  # FP64_BLANK
        series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", [(100, "1e19")]),  # no sentinel, no int64
    ])
    row, = table.to_pylist()
    assert (row["power_w"], row["pcie_tx_bytes_per_s"], row["sm_clock_mhz"], row["power_limit_w"]) == (
        350.5, None, None, None)
    assert row["energy_mj_total"] is None
    assert len(rejected) == 1 and "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in rejected[0]
    assert f"outside what its integer column holds (-{2**63}..{2**63 - 1})" in rejected[0]


def test_a_value_its_narrow_column_cannot_hold_is_set_aside_and_the_range_is_written():
    """An SM clock of 4294967295 (an unsigned -1) in the int32 column, or a GPU index of 70000 in
    the int16 one, made pyarrow refuse the whole range: the sync left it pending and failed on it
    every time after, and no GPU's DCGM readings were written again."""
    table, rejected = pivot_range_result([
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "350.5"), (101, "351.5")]),
        series("DCGM_FI_DEV_SM_CLOCK", [(100, "1980"), (101, "4294967295")]),
        series("DCGM_FI_DEV_FB_USED", [(100, "1e12")]),
        series("DCGM_FI_DEV_POWER_USAGE", [(100, "90.0")], gpu="70000", UUID="GPU-far"),
    ])
    rows = {r["sampled_at"].timestamp(): r for r in table.to_pylist()}
    assert [(t, r["power_w"], r["sm_clock_mhz"], r["mem_used_mib"]) for t, r in sorted(rows.items())] == [
        (100.0, 350.5, 1980, None), (101.0, 351.5, None, None)]
    assert len(rejected) == 3
    assert "DCGM_FI_DEV_SM_CLOCK" in rejected[0] and "(-2147483648..2147483647)" in rejected[0]
    assert "DCGM_FI_DEV_FB_USED" in rejected[1]
    assert "gpu label '70000' is not a GPU index" in rejected[2]


def test_a_zero_memory_temperature_beside_a_warm_gpu_is_not_a_reading():
    # DCGM reports 0 C for a GPU without a memory sensor (L4): NULL, not a cold memory.
    table, rejected = pivot_range_result([
        series("DCGM_FI_DEV_GPU_TEMP", [(100, "61"), (101, "62")]),
        series("DCGM_FI_DEV_MEMORY_TEMP", [(100, "0"), (101, "48"), (102, "0")]),
    ])
    assert rejected == []
    assert [(r["temp_c"], r["mem_temp_c"]) for r in table.to_pylist()] == [
        (61.0, None), (62.0, 48.0), (None, 0.0)]  # no GPU temperature: nothing tells, kept


@given(st.lists(st.integers(min_value=0, max_value=10**15), min_size=1, max_size=20))
@settings(max_examples=50, deadline=None)
@example(values=[2_147_483_632, 2_147_483_635])  # DCGM's INT32 blank: an honest reading of this INT64 counter
def test_energy_counter_survives_as_exact_integer_millijoules(values):
    result = [series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", [(1000 + i, str(v)) for i, v in enumerate(values)])]
    table, _ = pivot_range_result(result)
    assert table.column("energy_mj_total").to_pylist() == values


class FakePrometheus:
    """One GPU scraped every 10 s at multiples of 10, power = timestamp / 10 W. Answers the raw
    samples query `selector[Ns]` at `time` with the samples in [time - N, time], both ends
    included as Prometheus 2.x does, and `time()` with the real clock."""

    SCRAPE_INTERVAL_S = 10

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []  # (window start, window end) of each samples query
        self.fail = 0
        self.time_fails = 0  # time() queries to fail (then answered with the real clock)

    def custom_query(self, query, params=None, timeout=None):
        if query == "time()":
            if self.time_fails:
                self.time_fails -= 1
                raise ConnectionError("read timed out")
            now = time.time()
            return [now, str(now)]
        if self.fail:
            self.fail -= 1
            raise ConnectionError("connection refused")
        window_s = int(re.fullmatch(r"\{.*\}\[(\d+)s\]", query).group(1))
        end = float(params["time"])
        return self.samples(end - window_s, end)

    def samples(self, start: float, end: float) -> list[dict]:
        self.calls.append((start, end))
        scrape = self.SCRAPE_INTERVAL_S
        values = [[t, str(t / 10)] for t in range(math.ceil(start / scrape) * scrape, int(end) + 1, scrape)]
        return [series("DCGM_FI_DEV_POWER_USAGE", values)]


def fake_source(tmp_path: Path, client: FakePrometheus, **kw) -> DcgmSource:
    kw.setdefault("settle_s", 0)
    return DcgmSource(tmp_path / "lake", step_s=10, state_path=tmp_path / "state.json", client=client,
                      initial_lookback_s=100, sleep=lambda s: None, **kw)


def stored_times(lake: Path) -> list[float]:
    table = ds.dataset(lake / "gpu_samples", format="parquet", partitioning="hive").to_table()
    return sorted(t.timestamp() for t in table.column("sampled_at").to_pylist())


@given(st.lists(st.integers(min_value=1, max_value=95), min_size=1, max_size=6),
       st.integers(min_value=0, max_value=5))
@settings(max_examples=examples(25), deadline=None)
def test_any_sequence_of_syncs_and_one_crash_writes_each_instant_exactly_once(tmp_path_factory, advances, crash_at):
    tmp_path = tmp_path_factory.mktemp("sync")
    client = FakePrometheus()
    src = fake_source(tmp_path, client)
    now = 1_700_000_000
    real_write = dcgm_module.write_range
    for i, advance in enumerate(advances):
        now += advance
        if i == crash_at:
            def crash(*a, **k):
                real_write(*a, **k)
                raise KeyboardInterrupt
            dcgm_module.write_range = crash
            try:
                src.sync(now_s=now)  # crashes if a range is due, else writes nothing
            except KeyboardInterrupt:
                pass
            finally:
                dcgm_module.write_range = real_write
        else:
            src.sync(now_s=now)
    src.sync(now_s=now)
    times = stored_times(tmp_path / "lake") if (tmp_path / "lake").exists() else []
    first_now = 1_700_000_000 + advances[0]
    start = (first_now - 100) // 10 * 10
    assert times == [float(t) for t in range(start, now // 10 * 10 + 1, 10)]


def test_a_sync_without_prometheus_clock_retries_it_and_then_writes_nothing(tmp_path):
    """time() failing while query_range works: with the node's clock alone, a clock running ahead
    would move the watermark past what Prometheus has not scraped. Retried, then the sync fails."""
    client = FakePrometheus()
    src = fake_source(tmp_path, client, retries=2)
    client.time_fails = 2
    assert src.sync(now_s=1_700_000_000)  # two failures, the third attempt answers
    watermark = src.state.load()["watermark_at"]
    client.time_fails = 3
    with pytest.raises(SourceError, match=r"did not answer time\(\) after 3 attempts"):
        src.sync(now_s=1_700_000_000 + 600)
    assert src.state.load()["watermark_at"] == watermark


def test_a_long_catch_up_is_split_into_adjacent_windows_of_at_most_an_hour(tmp_path):
    client = FakePrometheus()
    src = fake_source(tmp_path, client)
    src.initial_lookback_s = 10 * 25_000
    src.sync(now_s=1_700_000_000)
    assert len(client.calls) == math.ceil(25_001 * 10 / dcgm_module.MAX_RAW_WINDOW_S)  # 70
    assert all(end - start <= dcgm_module.MAX_RAW_WINDOW_S for start, end in client.calls)
    assert all(later[0] == earlier[1] for earlier, later in zip(client.calls, client.calls[1:]))
    assert len(stored_times(tmp_path / "lake")) == 25_001  # each sample once, the shared bounds too


def test_retries_are_bounded_and_then_the_error_names_the_url(tmp_path):
    client = FakePrometheus()
    client.fail = 10
    src = fake_source(tmp_path, client, retries=2)
    with pytest.raises(SourceError, match=r"http://127.0.0.1:9090 did not answer .* after 3 attempts: ConnectionError"):
        src.sync(now_s=1_700_000_000)
    assert client.fail == 7


def test_a_missing_prometheus_client_is_said_once_and_not_retried_as_a_server_down(tmp_path, monkeypatch):
    # seen on a GPU machine with only the base wheels: four attempts and 7 s of backoff per sync,
    # each logged as "Prometheus failed", for a library that was simply not installed
    import builtins

    real_import = builtins.__import__

    def no_client(name, *args, **kwargs):
        if name == "prometheus_api_client":
            raise ModuleNotFoundError("No module named 'prometheus_api_client'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_client)
    slept: list[float] = []
    src = DcgmSource(tmp_path / "lake", retries=3, sleep=slept.append, state_path=tmp_path / "state.json")
    with pytest.raises(SourceError, match=r"prometheus-api-client is not installed.*pip install 'joulehouse\[node\]'"):
        src.sync(now_s=1_700_000_000)
    assert slept == []


def test_counters_file_enables_every_field_the_source_reads():
    text = (REPO / "infra" / "dcgm-exporter" / "counters.csv").read_text()
    assert text.startswith("# Format")
    enabled = {}
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            field, kind, help_text = (p.strip() for p in line.split(",", 2))
            assert kind in ("gauge", "counter", "label") and help_text, line
            enabled[field] = kind
    assert set(FIELDS) <= set(enabled)
    assert enabled["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"


def test_scrape_config_keeps_every_field_and_is_valid():
    config = REPO / "infra" / "prometheus" / "prometheus.yml"
    keep = re.search(r'regex: "([^"]+)"', config.read_text()).group(1)
    assert all(re.fullmatch(keep, name) for name in [*FIELDS, *FIELD_ALIASES])
    if shutil.which("promtool"):
        subprocess.run(["promtool", "check", "config", str(config)], check=True, capture_output=True)


class ClockedPrometheus(FakePrometheus):
    """Has samples only up to its own clock, and answers `time()` with it."""

    def __init__(self, now: int) -> None:
        super().__init__()
        self.now = now

    def custom_query(self, query, params=None, timeout=None):
        if query == "time()":
            return [self.now, str(self.now)]
        return super().custom_query(query, params, timeout)

    def samples(self, start: float, end: float) -> list[dict]:
        return super().samples(start, min(end, self.now))


def test_a_node_clock_ahead_of_prometheus_does_not_skip_what_it_has_not_scraped_yet(tmp_path):
    """The node's clock jumps a day ahead for one sync: the watermark stays at Prometheus' own
    time, so the next hour's samples are read when they exist (they were skipped for a day)."""
    client = ClockedPrometheus(1_700_000_000)
    src = fake_source(tmp_path, client)
    src.sync(now_s=1_700_000_000)
    src.sync(now_s=1_700_000_000 + 86_400)
    client.now += 3600
    src.sync(now_s=1_700_000_000 + 3600)
    times = stored_times(tmp_path / "lake")
    assert times == [float(t) for t in range(1_700_000_000 - 100, 1_700_000_000 + 3601, 10)]


def test_a_node_clock_a_little_ahead_skips_nothing_under_a_short_settle_time(tmp_path):
    """Prometheus' time was used only past 30 s ahead: with a 10 s settle time a node 25 s ahead set
    the watermark past 10 s Prometheus had not scraped yet (review, helper-92)."""
    client = ClockedPrometheus(1_700_000_000)
    src = fake_source(tmp_path, client, settle_s=10)
    src.sync(now_s=1_700_000_000 + 25)
    client.now += 600
    src.sync(now_s=1_700_000_000 + 600 + 25)
    times = stored_times(tmp_path / "lake")
    assert times == [float(t) for t in range(int(times[0]), 1_700_000_000 + 600 - 10 + 1, 10)]


def test_a_larger_step_after_a_restart_skips_no_sample(tmp_path):
    """prometheus_step_s 10 -> 40 between runs, the watermark at a multiple of 10 but not of 40:
    the next window opened at its first multiple of 40 less a step, and the samples between the
    watermark and it were never read (review, helper-92)."""
    client = FakePrometheus()
    fake_source(tmp_path, client).sync(now_s=1_700_000_010)  # watermark at ...010, not a multiple of 40
    DcgmSource(tmp_path / "lake", step_s=40, state_path=tmp_path / "state.json", client=client, settle_s=0,
               initial_lookback_s=100, sleep=lambda s: None).sync(now_s=1_700_000_400)
    times = stored_times(tmp_path / "lake")
    assert times == [float(t) for t in range(int(times[0]), int(times[-1]) + 1, 10)] and times[-1] >= 1_700_000_360


class IPv6Prometheus(FakePrometheus):
    """FakePrometheus plus a second GPU whose only host is an IPv6 `instance` ('[fd00::7]:9400'):
    '[fd00::7]' cannot name a partition folder."""

    def samples(self, start: float, end: float) -> list[dict]:
        good = super().samples(start, end)
        labels = {"__name__": "DCGM_FI_DEV_POWER_USAGE", "gpu": "0", "UUID": "GPU-v6", "instance": "[fd00::7]:9400"}
        return good + [{"metric": labels, "values": good[0]["values"]}]


def test_a_series_whose_host_cannot_name_a_folder_is_set_aside_and_the_other_hosts_are_written(tmp_path):
    # It once raised inside write_range: the range stayed pending and every sync failed on it.
    src = fake_source(tmp_path, IPv6Prometheus())
    assert src.sync(now_s=1_700_000_000)
    assert src.state.load()["pending"] is None
    table = ds.dataset(tmp_path / "lake" / "gpu_samples", format="parquet", partitioning="hive").to_table()
    assert set(table.column("gpu_uuid").to_pylist()) == {"GPU-abc"}
    assert table.num_rows == len(range(1_700_000_000 - 100, 1_700_000_001, 10))
    assert src.rejected_series and all("'[fd00::7]' cannot name a partition folder" in r for r in src.rejected_series)


@pytest.mark.parametrize("state", ["folder", "list", "latin-1"])
def test_a_watermark_file_that_cannot_be_read_stops_the_sync_in_one_line(tmp_path, state):
    """A folder where the file should be, a JSON list, bytes that are not UTF-8: a SourceError
    naming the file (one line in the collector's log), not an OSError's traceback every poll."""
    from joulehouse.collectors.sources.base import SourceError
    from joulehouse.collectors.sources.dcgm_state import WatermarkState

    path = tmp_path / "state.json"
    if state == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"[1, 2]" if state == "list" else b'{"state_version": "\xe9"}')
    with pytest.raises(SourceError, match="state.json"):
        WatermarkState(path).load()


def test_a_watermark_that_cannot_be_written_is_a_source_error_and_leaves_no_temp_file(tmp_path):
    from joulehouse.collectors.sources.base import SourceError
    from joulehouse.collectors.sources.dcgm_state import WatermarkState

    (tmp_path / "state.json").mkdir()  # os.replace cannot put a file over a folder
    with pytest.raises(SourceError, match="cannot be written"):
        WatermarkState(tmp_path / "state.json").save({"state_version": 1})
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_the_links_source_names_itself_in_its_errors_and_logs(tmp_path, caplog):
    """The links source shares DCGM's reader: its errors and logs said `dcgm:`, which sent an operator
    whose link collector failed to look at the DCGM one."""
    from joulehouse.collectors.sources.links import SOURCE_TAG, PrometheusLinkSource

    client = FakePrometheus()
    client.fail = 10
    src = PrometheusLinkSource(tmp_path / "lake", step_s=10, state_path=tmp_path / "links.json", client=client,
                               initial_lookback_s=100, sleep=lambda s: None, settle_s=0, retries=1)
    with caplog.at_level("WARNING"), pytest.raises(SourceError) as refused:
        src.sync(now_s=1_700_000_000)
    assert str(refused.value).startswith(f"{SOURCE_TAG}: Prometheus at ")
    assert caplog.messages and all(m.startswith(f"{SOURCE_TAG}: ") for m in caplog.messages)
