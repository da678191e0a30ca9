"""A GPU that read no memory activity, PCIe traffic or temperature is scored with its model's busy
mean of the day (recommend_gpu_profile.sql's model_* columns). That mean describes the model's GPUs,
not their sampling rates: pooled sample by sample, a GPU read every second by NVML counted 15 times
one read every 15 s by DCGM, and the stand-in was the fast GPU's own mean."""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from joulehouse.collectors.schema import conform
from joulehouse.models.recommend_inputs import gpu_day_profiles
from power_synthetic import load_samples

DAY = dt.date(2026, 3, 2)
A100 = "NVIDIA A100-SXM4-80GB"
START = dt.datetime(2026, 3, 2, 8, tzinfo=dt.timezone.utc)


def _gpu(uuid: str, interval_s: float, source: str, *, dram: float | None, util_mem_pct: float | None,
         pcie_gbps: float | None, temp_c: float | None) -> pa.Table:
    """One A100 busy for an hour (SM activity 0.6, utilisation 90%), read every `interval_s`;
    a measure given as None was not read."""
    n = int(3600 / interval_s)

    def column(value, dtype):
        return pa.nulls(n, dtype) if value is None else pa.array(np.full(n, value), dtype)

    half_pcie_bytes = None if pcie_gbps is None else int(pcie_gbps * 1e9 / 2)
    return conform("gpu_samples", pa.table({
        "sampled_at": pa.array([START + dt.timedelta(seconds=interval_s * i) for i in range(n)],
                               pa.timestamp("us", tz="UTC")),
        "host": ["node-01"] * n, "gpu_index": np.zeros(n, np.int16), "gpu_uuid": [uuid] * n, "gpu_model": [A100] * n,
        "power_w": np.full(n, 300.0, np.float32), "power_limit_w": np.full(n, 400.0, np.float32),
        "sm_clock_mhz": np.full(n, 1410, np.int32), "clock_event_reasons": np.zeros(n, np.int64),
        "sm_active_ratio": np.full(n, 0.6, np.float32), "util_gpu_pct": np.full(n, 90.0, np.float32),
        "dram_active_ratio": column(dram, pa.float32()), "util_mem_pct": column(util_mem_pct, pa.float32()),
        "temp_c": column(temp_c, pa.float32()),
        "pcie_tx_bytes_per_s": column(half_pcie_bytes, pa.int64()),
        "pcie_rx_bytes_per_s": column(half_pcie_bytes, pa.int64()),
        "source": [source] * n}))


def test_the_models_stand_in_weighs_each_gpu_once_whatever_its_sampling_rate():
    fast = _gpu("GPU-fast", 1.0, "nvml", dram=0.2, util_mem_pct=30.0, pcie_gbps=2.0, temp_c=50.0)  # 3600 rows
    slow = _gpu("GPU-slow", 15.0, "dcgm-exporter", dram=0.8, util_mem_pct=70.0, pcie_gbps=10.0, temp_c=80.0)  # 240
    unread = _gpu("GPU-unread", 10.0, "dcgm-exporter", dram=None, util_mem_pct=None, pcie_gbps=None, temp_c=None)
    table = pa.concat_tables([fast, slow, unread])
    con = duckdb.connect()
    load_samples(con, table.append_column("day", pa.array([DAY] * table.num_rows, pa.date32())))

    profiles = {p["gpu_uuid"]: p for p in gpu_day_profiles(con, DAY)}
    stand_in = profiles["GPU-unread"]
    assert stand_in["dram_ratio"] is None and stand_in["temp_c"] is None and stand_in["pcie_gbps"] is None
    # the mean of the two GPUs' busy means; pooled by sample it was (3600 x 0.2 + 240 x 0.8) / 3840 = 0.2375
    assert stand_in["model_dram_ratio"] == pytest.approx((0.2 + 0.8) / 2, rel=1e-6)
    assert stand_in["model_util_mem_ratio"] == pytest.approx((0.30 + 0.70) / 2, rel=1e-6)
    assert stand_in["model_pcie_gbps"] == pytest.approx((2.0 + 10.0) / 2, rel=1e-6)
    assert stand_in["model_temp_c"] == pytest.approx((50.0 + 80.0) / 2, rel=1e-6)
    # one mean per model: the GPUs that read the measure carry the same
    assert {p["model_temp_c"] for p in profiles.values()} == {stand_in["model_temp_c"]}
