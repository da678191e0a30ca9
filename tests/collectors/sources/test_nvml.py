"""NvmlSource against the real nvidia-ml-py and the stand-in libnvidia-ml.so.1."""

from __future__ import annotations

import threading
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joulehouse.collectors.schema import conform
from joulehouse.collectors.sources.base import Source, SourceError
from joulehouse.collectors.sources.nvml import NvmlSource, NvmlUnavailable
from joulehouse.collectors.writer import write_dataset
from nvml_stub.fixture import GpuState

NOW_S = 1_767_225_600.25  # 2026-01-01T00:00:00.25Z


@pytest.fixture()
def source(nvml_stub):
    src = NvmlSource("node-01", clock=lambda: NOW_S)
    yield src
    src.close()


def rows_by_index(table: pa.Table) -> dict[int, dict]:
    return {r["gpu_index"]: r for r in table.to_pylist()}


def test_readings_are_converted_to_lake_units(nvml_stub, source):
    nvml_stub.write([GpuState.a100(0, power_mw=312_345, energy_mj_total=9_876_543_210, temp_c=61,
                                   mem_temp_c=70, sm_clock_mhz=1410, mem_clock_mhz=1593,
                                   util_gpu_pct=97, util_mem_pct=41, mem_used_mib=40_000,
                                   power_limit_mw=300_000, pcie_tx_kb_per_s=1500,
                                   pcie_rx_kb_per_s=3, pstate=0, clock_event_reasons=0x4,
                                   processes={4242: 2048, 4243: 10})])
    assert isinstance(source, Source)
    [row] = source.read().to_pylist()
    assert row["gpu_model"] == "NVIDIA A100-SXM4-80GB"
    assert row["gpu_uuid"].startswith("GPU-")
    assert row["power_w"] == pytest.approx(312.345)
    assert row["energy_mj_total"] == 9_876_543_210
    assert (row["temp_c"], row["mem_temp_c"]) == (61, 70)
    assert (row["sm_clock_mhz"], row["mem_clock_mhz"]) == (1410, 1593)
    assert (row["util_gpu_pct"], row["util_mem_pct"]) == (97, 41)
    assert row["mem_used_mib"] == 40_000
    assert row["power_limit_w"] == 300.0
    assert (row["power_limit_min_w"], row["power_limit_max_w"], row["power_limit_default_w"]) == (100, 400, 400)
    assert (row["pcie_tx_bytes_per_s"], row["pcie_rx_bytes_per_s"]) == (1500 * 1024, 3 * 1024)
    assert row["pstate"] == 0
    assert row["clock_event_reasons"] == 0x4
    assert sorted(row["running_pids"]) == [4242, 4243]
    assert row["error"] is None and row["source"] == "nvml"
    assert row["sampled_at"].timestamp() == NOW_S and row["sampled_at"].tzinfo is not None


def test_a_driver_before_535_gives_the_clock_event_reasons_under_their_older_name(nvml_stub, source):
    nvml_stub.set(0, clock_event_reasons=0x4, error={"nvmlDeviceGetCurrentClocksEventReasons": "FUNCTION_NOT_FOUND"})
    nvml_stub.set(1, clock_event_reasons=0x4, error={"nvmlDeviceGetCurrentClocksEventReasons": "FUNCTION_NOT_FOUND"})
    first, second = source.read().to_pylist(), source.read().to_pylist()
    assert [r["clock_event_reasons"] for r in first + second] == [0x4] * 4
    assert all(r["error"] is None for r in first + second)  # a missing function is not an error
    # the driver's answer does not change while it runs: the newer name is not asked again
    nvml_stub.set(0, error={"nvmlDeviceGetCurrentClocksThrottleReasons": "UNKNOWN"})
    assert "nvmlDeviceGetCurrentClocksThrottleReasons" in source.read().to_pylist()[0]["error"]


def test_lost_gpu_marks_its_row_and_the_others_go_on(nvml_stub, source):
    source.read()
    nvml_stub.set(1, error={"*": "GPU_IS_LOST"})
    rows = rows_by_index(source.read())
    assert rows[0]["error"] is None and rows[0]["power_w"] == 72.0
    assert "GPU is lost" in rows[1]["error"] or "15" in rows[1]["error"]
    assert rows[1]["power_w"] is None and rows[1]["energy_mj_total"] is None
    assert rows[1]["gpu_uuid"] == rows_by_index(source.read())[1]["gpu_uuid"] != ""
    nvml_stub.set(1, error={"*": "SUCCESS"})  # back on the bus
    assert rows_by_index(source.read())[1]["error"] is None


def test_unsupported_readings_are_null_not_zero(nvml_stub, source):
    nvml_stub.write([GpuState(name="Tesla V100-SXM2-16GB", uuid="GPU-v100", power_mw=40_000)])
    [row] = source.read().to_pylist()
    assert row["power_w"] == 40.0
    for column in ("energy_mj_total", "temp_c", "mem_temp_c", "sm_clock_mhz", "util_gpu_pct",
                   "pcie_tx_bytes_per_s", "pstate", "clock_event_reasons", "power_limit_w"):
        assert row[column] is None, column
    assert row["error"] is None  # a reading the GPU does not have is not an error


def test_other_errors_null_the_reading_and_say_which_call(nvml_stub, source):
    nvml_stub.set(0, error={"nvmlDeviceGetPowerUsage": "UNKNOWN"})
    rows = rows_by_index(source.read())
    assert rows[0]["power_w"] is None
    assert "nvmlDeviceGetPowerUsage" in rows[0]["error"]
    assert rows[0]["energy_mj_total"] is not None


def test_an_unsigned_reading_past_its_column_is_null_and_said_and_the_rest_kept(nvml_stub, source):
    # NVML's energy counter and clock event reasons are u64: one garbage value >= 2**63 made
    # pyarrow refuse the poll's table (OverflowError), every GPU's row lost.
    nvml_stub.set(1, energy_mj_total=2**64 - 1, clock_event_reasons=2**63)
    rows = rows_by_index(source.read())
    assert rows[0]["error"] is None and rows[0]["energy_mj_total"] is not None
    assert rows[1]["energy_mj_total"] is None and rows[1]["clock_event_reasons"] is None
    assert rows[1]["power_w"] == rows[0]["power_w"] is not None
    assert "energy_mj_total: NVML gave 18446744073709551615" in rows[1]["error"]
    assert f"clock_event_reasons: NVML gave {2**63}" in rows[1]["error"]


def test_a_failed_discovery_is_said_in_the_row_and_tried_again(nvml_stub):
    """nvmlDeviceGetName and the limit constraints answer UNKNOWN at start-up: the rows say so
    and carry no model, and once NVML answers, the model and limits are found (not NULL for good)."""
    nvml_stub.set(0, error={"nvmlDeviceGetName": "UNKNOWN", "nvmlDeviceGetPowerManagementLimitConstraints": "UNKNOWN"})
    src = NvmlSource("node-01", clock=lambda: NOW_S)
    try:
        first = rows_by_index(src.read())[0]
        assert first["gpu_model"] is None and first["power_limit_max_w"] is None
        assert "nvmlDeviceGetName" in first["error"] and first["power_w"] is not None
        nvml_stub.set(0, error={"nvmlDeviceGetName": "SUCCESS", "nvmlDeviceGetPowerManagementLimitConstraints": "SUCCESS"})
        later = rows_by_index(src.read())[0]
        assert later["gpu_model"] and later["power_limit_max_w"] and later["error"] is None
        assert rows_by_index(src.read())[0]["gpu_model"] == later["gpu_model"]
    finally:
        src.close()


@pytest.mark.parametrize("value_type", [0, 1, 3, 5])
def test_memory_temperature_is_read_from_the_member_valuetype_names(nvml_stub, source, value_type):
    """nvmlDeviceGetFieldValues returns a union: a driver answering as a double (type 0) or a
    signed int (type 5) must give the same 71 C, not the bits of another member."""
    nvml_stub.write([GpuState.h200(0, mem_temp_c=71, mem_temp_value_type=value_type)])
    [row] = source.read().to_pylist()
    assert row["mem_temp_c"] == 71.0 and row["error"] is None


def test_no_driver_raises_a_source_error(nvml_stub):
    nvml_stub.write([], errors={"nvmlInitWithFlags": "DRIVER_NOT_LOADED"})
    with pytest.raises(NvmlUnavailable, match="node-01"):
        NvmlSource("node-01").read()


def test_rows_land_in_the_lake(nvml_stub, source, lake):
    written = write_dataset(lake, "gpu_samples", source.read())
    assert sum(w.rows for w in written) == 2
    assert written[0].path.parent.name == "host=node-01"


# The state file is rewritten whole for every example, so sharing the fixture is safe.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(power_mw=st.integers(0, 2**32 - 2), energy_mj=st.integers(0, 2**63 - 1),
       pcie_kb=st.integers(0, 2**32 - 2))
def test_conversions_are_exact_over_nvml_ranges(nvml_stub, power_mw, energy_mj, pcie_kb):
    nvml_stub.write([GpuState.h200(0, power_mw=power_mw, energy_mj_total=energy_mj, pcie_tx_kb_per_s=pcie_kb)])
    src = NvmlSource("node-02")
    try:
        row = conform("gpu_samples", src.read()).to_pylist()[0]
    finally:
        src.close()
    assert row["energy_mj_total"] == energy_mj
    assert row["pcie_tx_bytes_per_s"] == pcie_kb * 1024
    assert row["power_w"] == pytest.approx(power_mw / 1000, rel=1e-6)  # float32 in the lake


def test_gpu_lost_before_start_gets_no_keyless_row_is_named_and_found_again(nvml_stub, source, lake, caplog):
    """NVML never gave its UUID: no row keyed '' (a phantom GPU in the lake), the log names the
    GPU index and why, and once it answers its rows come with its UUID."""
    caplog.set_level("INFO", logger="joulehouse.collectors.sources.nvml")
    nvml_stub.set(1, error={"*": "GPU_IS_LOST"})
    table = source.read()
    write_dataset(lake, "gpu_samples", table)
    assert [(r["gpu_index"], r["error"]) for r in table.to_pylist()] == [(0, None)]
    assert all(r["gpu_uuid"] for r in table.to_pylist())
    assert "GPU is lost" in source.unidentified[1]
    assert "GPU index 1 on node-01 has no UUID" in caplog.text and "GPU is lost" in caplog.text
    nvml_stub.set(1, error={"*": "SUCCESS"})
    rows = rows_by_index(source.read())
    assert rows[1]["error"] is None and rows[1]["gpu_uuid"].startswith("GPU-")
    assert source.unidentified == {} and "GPU index 1 on node-01 identified as GPU-" in caplog.text


def test_a_node_whose_every_gpu_is_lost_at_start_starts_then_fails_each_read_naming_them(nvml_stub, source):
    """The first read answers (the collector starts: a GPU may come back); later reads that can
    identify no GPU fail as a source error, not as a healthy read of nothing."""
    nvml_stub.set(0, error={"*": "GPU_IS_LOST"})
    nvml_stub.set(1, error={"*": "GPU_IS_LOST"})
    assert source.read().num_rows == 0
    with pytest.raises(SourceError, match=r"sees 2 GPUs and can identify none: GPU index 0: .*GPU is lost"):
        source.read()
    nvml_stub.set(0, error={"*": "SUCCESS"})
    assert [r["gpu_index"] for r in source.read().to_pylist()] == [0]


class _PcieReadsMeet:
    """pynvml, but each nvmlDeviceGetPcieThroughput waits until every one of a poll's is in
    flight: a source that reads them one after another stops at the first (BrokenBarrierError
    after `timeout_s`), one that reads them at once goes through."""

    def __init__(self, reads: int, timeout_s: float = 10.0):
        import pynvml

        self._pynvml = pynvml
        self.barrier = threading.Barrier(reads, timeout=timeout_s)

    def __getattr__(self, name):
        return getattr(self._pynvml, name)

    def nvmlDeviceGetPcieThroughput(self, handle, counter):
        self.barrier.wait()
        return self._pynvml.nvmlDeviceGetPcieThroughput(handle, counter)


def test_the_pcie_reads_of_every_gpu_run_at_once(nvml_stub):
    # NVML counts PCIe bytes over a 20 ms window per call: 16 calls in a row cost a poll of 8 GPUs
    # about 340 ms on a real H200 (infra/device/README.md); at once, one window
    nvml_stub.write([GpuState.h200(i, pcie_tx_kb_per_s=100 + i, pcie_rx_kb_per_s=200 + i) for i in range(8)])
    source = NvmlSource("node-01", nvml=_PcieReadsMeet(reads=16), clock=lambda: NOW_S)
    try:
        rows = source.read().to_pylist()
        assert [(r["pcie_tx_bytes_per_s"], r["pcie_rx_bytes_per_s"]) for r in rows] == \
            [((100 + i) * 1024, (200 + i) * 1024) for i in range(8)]
        assert all(r["error"] is None for r in rows)
    finally:
        source.close()


def test_a_gpu_lost_during_its_pcie_read_has_its_whole_row_nulled(nvml_stub, source):
    nvml_stub.set(1, error={"nvmlDeviceGetPcieThroughput": "GPU_IS_LOST"})
    rows = rows_by_index(source.read())
    assert rows[1]["power_w"] is None and rows[1]["pcie_tx_bytes_per_s"] is None
    assert "nvmlDeviceGetPcieThroughput" in rows[1]["error"]
    assert rows[0]["power_w"] is not None and rows[0]["error"] is None


class _Hooked:
    """pynvml with some functions replaced by the test."""

    def __init__(self, **hooks):
        import pynvml

        self._pynvml, self.hooks = pynvml, hooks

    def __getattr__(self, name):
        return self.hooks.get(name) or getattr(self._pynvml, name)


def test_a_poll_that_fails_half_way_leaves_no_pcie_read_behind_to_spoil_the_next(nvml_stub):
    """A read left running by a failed poll used to mark its GPU lost in the next poll's row."""
    nvml_stub.write([GpuState.h200(i) for i in range(2)])
    nvml = _Hooked()
    started, returned = [], []

    def slow_then_lost(handle, counter):
        started.append(counter)
        time.sleep(0.2)
        returned.append(counter)
        raise nvml._pynvml.NVMLError(nvml._pynvml.NVML_ERROR_GPU_IS_LOST)

    def broken(handle):
        raise RuntimeError("a pynvml-side failure")

    source = NvmlSource("node-01", nvml=nvml, clock=lambda: NOW_S)
    try:
        source.read()
        nvml.hooks.update(nvmlDeviceGetPcieThroughput=slow_then_lost, nvmlDeviceGetUtilizationRates=broken)
        with pytest.raises(RuntimeError, match="pynvml-side"):
            source.read()
        assert len(returned) == len(started) == 4  # every read of the failed poll came back before it ended
        nvml.hooks.clear()
        rows = source.read().to_pylist()
        assert [(r["error"], r["power_w"] is not None) for r in rows] == [(None, True), (None, True)]
    finally:
        source.close()


def test_the_errors_of_a_row_are_listed_in_the_same_order_every_poll(nvml_stub, source):
    nvml_stub.set(0, error={"nvmlDeviceGetPcieThroughput": "UNKNOWN", "nvmlDeviceGetEnforcedPowerLimit": "UNKNOWN",
                            "nvmlDeviceGetPerformanceState": "UNKNOWN"})
    errors = {source.read().to_pylist()[0]["error"] for _ in range(20)}
    assert len(errors) == 1
    (error,) = errors
    assert error.index("nvmlDeviceGetEnforcedPowerLimit") < error.index("nvmlDeviceGetPcieThroughput")
