"""The power interval's bottleneck rows read activity and memory in the measures their model's fit reads.

A GPU read by DCGM has SM and DRAM activity and NVML's utilisations; its model's fit reads one pair
(feature set 'dcgm' or 'nvml'). The rows were drawn on the stream's pair (SM and DRAM) whatever the
fit read: an A100 fitted on NVML utilisation, whose work was half compute-heavy (SM 0.8, DRAM 0.3)
and half memory-heavy (SM 0.3, DRAM 0.7) while NVML read 100% / 50% throughout, got a compute-bound
row at 255 W (12.0%) and a memory-bound one at 400 W (no gain); its fit sees one compute-bound
operating point, whose interval is 305 W (13.5%), the interval of its 'mix' row.
"""

from __future__ import annotations

import datetime as dt
import logging

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from joulehouse.collectors.schema import RATIO_STEP, conform, round_to_step
from joulehouse.models.caps import WorkloadProfile, outcome_under_limit
from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.power_interval import MIX, PowerInterval, power_interval_day
from joulehouse.models.settings import RecommendSettings
from joulehouse.models.sql import SQL
from joulehouse.warehouse.sqlio import replace_day_rows
from power_synthetic import load_samples

DAY = dt.date(2026, 3, 2)
A100 = "NVIDIA A100-SXM4-80GB"
COEF = PowerCoefficients(static_w=60.0, temp_w_per_c=0.0, dyn_w=300.0, dyn_freq_exponent=3.0, mem_w=40.0,
                         pcie_w_per_gbps=0.0, f_max_mhz=1410.0)
SM_AND_DRAM_BY_PHASE = [(0.0, 0.0), (0.8, 0.3), (0.3, 0.7)]  # 10-minute phases; 0: idle
NVML_BUSY_UTIL_PCT, NVML_BUSY_UTIL_MEM_PCT = 100.0, 50.0  # a kernel runs through every busy sample


def _gpu_samples(gpu_uuid: str, *, read_by_dcgm: bool) -> pa.Table:
    """One A100, 6 h at 10 s through the phases. NVML's utilisations in every sample; DCGM's SM and
    DRAM activity only where `read_by_dcgm` (else NULL, as an NVML-only GPU has them)."""
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    n = 2160
    sm_active, dram_active = np.array([SM_AND_DRAM_BY_PHASE[(i // 60) % len(SM_AND_DRAM_BY_PHASE)]
                                       for i in range(n)]).T
    busy = sm_active > 0
    table = conform("gpu_samples", pa.table({
        "sampled_at": pa.array([start + dt.timedelta(seconds=10 * i) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "host": ["node-01"] * n, "gpu_index": np.zeros(n, np.int16), "gpu_uuid": [gpu_uuid] * n,
        "gpu_model": [A100] * n, "power_w": np.where(busy, 390.0, 80.0).astype(np.float32),
        "temp_c": np.full(n, 60.0, np.float32), "sm_clock_mhz": np.full(n, 1410, np.int32),
        "util_gpu_pct": np.where(busy, NVML_BUSY_UTIL_PCT, 0.0).astype(np.float32),
        "util_mem_pct": np.where(busy, NVML_BUSY_UTIL_MEM_PCT, 0.0).astype(np.float32),
        "sm_active_ratio": pa.array(sm_active if read_by_dcgm else [None] * n, pa.float32()),
        "dram_active_ratio": pa.array(dram_active if read_by_dcgm else [None] * n, pa.float32()),
        "power_limit_w": np.full(n, 400.0, np.float32), "clock_event_reasons": np.zeros(n, np.int64),
        "source": ["dcgm-exporter" if read_by_dcgm else "nvml"] * n}))
    return table.append_column("day", pa.array([DAY] * n, pa.date32()))


def _intervals(feature_set: str, gpus: dict[str, bool]) -> dict[str, PowerInterval]:
    """The throughput intervals by bottleneck of a day of `gpus` (uuid: read by DCGM), their model's
    fit, by hand, reading `feature_set`."""
    con = duckdb.connect()
    for gpu_uuid, read_by_dcgm in gpus.items():
        load_samples(con, _gpu_samples(gpu_uuid, read_by_dcgm=read_by_dcgm))
    SQL.execute(con, "fct_power_model")
    replace_day_rows(con, DAY, {"fct_power_model": [COEF.as_row() | {
        "gpu_model": A100, "day": DAY, "fitted_at": dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc),
        "feature_set": feature_set, "n_samples": 100_000, "passed_gate": True}]})
    intervals, _ = power_interval_day(con, DAY, RecommendSettings())
    return {i.bottleneck: i for i in intervals if i.workload_class == "throughput"}


def _as_read(sm_active_ratio: float, dram_active_ratio: float) -> WorkloadProfile:
    """The operating point of DCGM's readings as the lake stores them (rounded to RATIO_STEP)."""
    stored = round_to_step(pa.array([sm_active_ratio, dram_active_ratio], pa.float32()), RATIO_STEP).to_pylist()
    return WorkloadProfile(activity_ratio=stored[0], memory_ratio=stored[1])


def _gain_pct(point: WorkloadProfile, interval: PowerInterval) -> float:
    """Work per joule at the interval's best limit over that at its default, minus 100 (models.caps)."""
    at_default = outcome_under_limit(COEF, point, interval.default_limit_w)
    at_best = outcome_under_limit(COEF, point, interval.best_limit_w)
    return 100 * (at_default.energy_ratio / at_best.energy_ratio - 1)


def test_a_model_fitted_on_utilisation_gets_the_bottleneck_rows_of_its_utilisation():
    """The fit reads 100% / 50% in every busy sample: all its work is compute-bound, at that one
    operating point, the one the 'mix' row scores (not the SM/DRAM split of the stream)."""
    rows = _intervals("nvml", {"GPU-a": True})
    assert rows.keys() == {"compute-bound", MIX}
    compute, mix = rows["compute-bound"], rows[MIX]
    assert compute.busy_share == pytest.approx(1.0)
    point = WorkloadProfile(activity_ratio=NVML_BUSY_UTIL_PCT / 100, memory_ratio=NVML_BUSY_UTIL_MEM_PCT / 100)
    assert compute.best_limit_w < compute.default_limit_w
    assert compute.perf_per_watt_gain_pct == pytest.approx(_gain_pct(point, compute), abs=1e-6)
    assert (compute.best_limit_w, compute.best_limit_w_low, compute.best_limit_w_high) == (
        mix.best_limit_w, mix.best_limit_w_low, mix.best_limit_w_high)
    assert compute.perf_per_watt_gain_pct == pytest.approx(mix.perf_per_watt_gain_pct, abs=1e-6)


def test_a_model_fitted_on_dcgm_keeps_the_sm_and_dram_bottlenecks_of_its_stream():
    rows = _intervals("dcgm", {"GPU-a": True})
    assert rows.keys() == {"compute-bound", "memory-bound", MIX}
    for bottleneck, (sm, dram) in zip(("compute-bound", "memory-bound"), SM_AND_DRAM_BY_PHASE[1:]):
        row = rows[bottleneck]
        assert row.busy_share == pytest.approx(0.5)
        assert row.perf_per_watt_gain_pct == pytest.approx(_gain_pct(_as_read(sm, dram), row), abs=1e-6)
    assert rows["compute-bound"].best_limit_w < rows["compute-bound"].default_limit_w


def test_busy_samples_without_the_activity_the_fit_reads_are_in_no_curve_and_said_so(caplog):
    """An NVML-only GPU of a model fitted on DCGM has no SM activity to score: its busy samples
    were drawn at NVML's 100% as if it were SM activity (a compute-bound row at 305 W, 13.5%).
    They are now left out, logged, and counted in the other rows' shares of the busy samples."""
    with caplog.at_level(logging.WARNING, logger="joulehouse.models.power_interval"):
        rows = _intervals("dcgm", {"GPU-dcgm": True, "GPU-nvml": False})
    assert rows.keys() == {"compute-bound", "memory-bound", MIX}
    for bottleneck, (sm, dram) in zip(("compute-bound", "memory-bound"), SM_AND_DRAM_BY_PHASE[1:]):
        assert rows[bottleneck].busy_share == pytest.approx(0.25)  # half of one GPU's of two GPUs' busy samples
        assert rows[bottleneck].perf_per_watt_gain_pct == pytest.approx(
            _gain_pct(_as_read(sm, dram), rows[bottleneck]), abs=1e-6)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and A100 in r.getMessage()]
    assert "1440 busy samples (50%)" in warning and "sm_active" in warning
    assert _intervals("dcgm", {"GPU-nvml": False}) == {}  # nothing the fit can score: no row, not NVML's as SM's
