"""NvmlLinkSource against the real nvidia-ml-py and the stand-in libnvidia-ml.so.1: NVLink KiB
counters (field values 138/139, all links summed) turned into bytes per second."""

from __future__ import annotations

import time

import pytest

from joulehouse.collectors.schema import conform
from joulehouse.collectors.sources.base import Source
from joulehouse.collectors.sources.nvml_links import NvmlLinkSource
from nvml_stub.fixture import GpuState

A100_LINKS = dict(nvlink_link_count=12, nvlink_speed_mbps=25_000)


@pytest.fixture()
def source(nvml_stub):
    src = NvmlLinkSource("node-01")
    yield src
    src.close()


def timed_read(src: NvmlLinkSource) -> tuple[float, list[dict], float]:
    before = time.time()
    rows = src.read().to_pylist()
    return before, rows, time.time()


def test_counter_rise_over_the_drivers_own_timestamps_is_the_rate(nvml_stub, source):
    nvml_stub.write([GpuState.a100(0, nvlink_tx_kib_total=1_000, nvlink_rx_kib_total=5_000, **A100_LINKS),
                     GpuState.h100(1)])  # no NVLink fields: a PCIe-only board
    assert isinstance(source, Source)
    b1, [first], a1 = timed_read(source)
    assert first["device"].startswith("GPU-") and first["link_kind"] == "nvlink" and first["gpu_index"] == 0
    assert first["tx_bytes_per_s"] is None and first["rx_bytes_per_s"] is None, "one reading is no rate"
    assert first["capacity_bytes_per_s"] == 12 * 25_000 * 1_000_000
    time.sleep(0.3)
    nvml_stub.set(0, nvlink_tx_kib_total=1_000 + 300_000, nvlink_rx_kib_total=5_000 + 30_000)
    b2, [second], a2 = timed_read(source)
    shortest, longest = b2 - a1, a2 - b1
    assert 300_000 * 1024 / longest <= second["tx_bytes_per_s"] <= 300_000 * 1024 / shortest
    assert second["rx_bytes_per_s"] == pytest.approx(second["tx_bytes_per_s"] / 10)
    assert conform("link_samples", source.read()).num_rows == 1


def test_a_counter_that_went_down_gives_no_rate_and_a_lost_gpu_no_row(nvml_stub, source):
    nvml_stub.write([GpuState.a100(0, nvlink_tx_kib_total=9_000, nvlink_rx_kib_total=9_000, **A100_LINKS),
                     GpuState.a100(1, nvlink_tx_kib_total=0, nvlink_rx_kib_total=0, **A100_LINKS)])
    source.read()
    nvml_stub.set(0, nvlink_tx_kib_total=10, nvlink_rx_kib_total=10)  # the driver reloaded
    nvml_stub.set(1, error={"*": "GPU_IS_LOST"})
    rows = source.read().to_pylist()
    assert [r["gpu_index"] for r in rows] == [0]
    assert rows[0]["tx_bytes_per_s"] is None and rows[0]["capacity_bytes_per_s"] == 3e11
