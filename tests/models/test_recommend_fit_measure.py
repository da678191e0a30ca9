"""The recommender scores a GPU on tenths of the activity measure its model's power fit reads.

A GPU read by DCGM has SM activity and NVML utilisation; its model's fit may read either
(power_window_choice.sql decides over the fit's window, the day's streams may say otherwise). NVML's
utilisation is the share of time a kernel ran, ~100% through every busy sample, while SM activity
spreads from light to heavy: tenths of SM activity rescaled to the utilisation's mean and fed to
a utilisation fit promised 8.6% where its own tenths give 12.2%.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from joulehouse.collectors.schema import conform
from joulehouse.models.caps import WorkloadProfile, outcome_under_limit
from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.recommend import gpu_profile, recommend_day
from joulehouse.models.recommend_inputs import gpu_day_profiles
from joulehouse.models.sql import SQL
from joulehouse.settings import RecommendSettings
from joulehouse.warehouse.sqlio import records, replace_day_rows
from power_synthetic import load_samples

DAY = dt.date(2026, 3, 2)
A100 = "NVIDIA A100-SXM4-80GB"
COEF = PowerCoefficients(static_w=60.0, temp_w_per_c=0.0, dyn_w=300.0, dyn_freq_exponent=3.0, mem_w=40.0,
                         pcie_w_per_gbps=0.0, f_max_mhz=1410.0)
SM_ACTIVITY_BY_PHASE = [0.0, 0.2, 0.35, 0.5, 0.65, 0.8]  # 10-minute phases, 0: idle


def _warehouse(feature_set: str) -> duckdb.DuckDBPyConnection:
    """One A100, 6 h at 10 s: in busy phases a kernel always runs (NVML utilisation 100%, memory
    utilisation 40%) at the phase's SM activity; idle phases read 0 on both. Its model's fit, by
    hand, reads `feature_set`."""
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    n = 2160
    sm_active = np.array([SM_ACTIVITY_BY_PHASE[(i // 60) % len(SM_ACTIVITY_BY_PHASE)] for i in range(n)])
    busy = sm_active > 0
    table = conform("gpu_samples", pa.table({
        "sampled_at": pa.array([start + dt.timedelta(seconds=10 * i) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "host": ["node-01"] * n, "gpu_index": np.zeros(n, np.int16), "gpu_uuid": ["GPU-a"] * n, "gpu_model": [A100] * n,
        "power_w": np.where(busy, 390.0, 80.0).astype(np.float32), "temp_c": np.full(n, 60.0, np.float32),
        "sm_clock_mhz": np.full(n, 1410, np.int32), "util_gpu_pct": np.where(busy, 100.0, 0.0).astype(np.float32),
        "util_mem_pct": np.where(busy, 40.0, 0.0).astype(np.float32), "sm_active_ratio": sm_active.astype(np.float32),
        "dram_active_ratio": (0.3 * sm_active).astype(np.float32), "power_limit_w": np.full(n, 400.0, np.float32),
        "clock_event_reasons": np.zeros(n, np.int64), "source": ["dcgm-exporter"] * n}))
    con = duckdb.connect()
    load_samples(con, table.append_column("day", pa.array([DAY] * n, pa.date32())))
    SQL.execute(con, "fct_power_model")
    replace_day_rows(con, DAY, {"fct_power_model": [COEF.as_row() | {
        "gpu_model": A100, "day": DAY, "fitted_at": start, "feature_set": feature_set, "n_samples": 100_000,
        "passed_gate": True}]})
    return con


def test_a_gpu_whose_model_reads_nvml_utilisation_gets_tenths_of_utilisation():
    nvml = gpu_day_profiles(_warehouse("nvml"), DAY)[0]
    assert nvml["activity_deciles"] == pytest.approx([1.0] * 10, abs=2e-3)  # a kernel ran in every busy sample
    assert nvml["deciles_activity_kind"] == "util_gpu"
    dcgm = gpu_day_profiles(_warehouse("dcgm"), DAY)[0]
    assert dcgm["activity_deciles"] == pytest.approx(np.repeat(SM_ACTIVITY_BY_PHASE[1:], 2), abs=2e-3)
    assert dcgm["deciles_activity_kind"] == "sm_active"
    # busy hours are the GPU's whatever its model reads: 5 of the 6 phases
    assert nvml["busy_hours"] == dcgm["busy_hours"] == pytest.approx(5 * 2160 / 6 * 10 / 3600, rel=1e-3)


def test_the_saving_of_a_gpu_fitted_on_utilisation_is_that_of_its_utilisation():
    """Every busy sample read 100% utilisation, so the utilisation fit sees one operating point:
    the recommended cap must save what models.caps gives that point, counted from the default
    limit. Scored on SM activity tenths it was promised 8.6% instead of 12.2%."""
    con = _warehouse("nvml")
    recommend_day(con, DAY, RecommendSettings(holdout_share=0.0))
    (row,) = records(con.execute("SELECT * FROM fct_recommendation"))
    assert row["workload_class"] == "throughput" and row["power_limit_w"] < row["default_limit_w"]
    point = WorkloadProfile(activity_ratio=1.0, memory_ratio=0.4, pcie_gbps=0.0, temp_c=60.0)
    at_default = outcome_under_limit(COEF, point, row["default_limit_w"])
    capped = outcome_under_limit(COEF, point, row["power_limit_w"])
    assert row["expected_saving_pct"] == pytest.approx(100 * (1 - capped.energy_ratio / at_default.energy_ratio), abs=1e-6)
    stretch = (1 + capped.slowdown_pct / 100) / (1 + at_default.slowdown_pct / 100)
    assert row["expected_slowdown_pct"] == pytest.approx(100 * (stretch - 1), abs=1e-6)


def test_tenths_of_another_measure_than_the_fit_reads_are_refused():
    row = {"gpu_uuid": "GPU-a", "gpu_model": A100, "sm_active_ratio": 0.5, "dram_ratio": 0.15, "util_gpu_ratio": 1.0,
           "util_mem_ratio": 0.4, "pcie_gbps": None, "temp_c": 60.0, "deciles_activity_kind": "sm_active",
           "activity_deciles": [0.2, 0.2, 0.35, 0.35, 0.5, 0.5, 0.65, 0.65, 0.8, 0.8]}
    assert gpu_profile(row, "dcgm").activity_ratio == 0.5
    with pytest.raises(ValueError, match="tenths are of sm_active.*reads util_gpu"):
        gpu_profile(row, "nvml")


def test_the_power_interval_of_a_class_scores_its_gpus_on_the_measure_their_fit_reads():
    """The 'mix' interval scores a class's GPUs as the recommender does: on tenths of utilisation
    here, one operating point, so its gain at its best limit is that point's under models.caps."""
    from joulehouse.models.power_interval import MIX, power_interval_day

    intervals, _ = power_interval_day(_warehouse("nvml"), DAY, RecommendSettings())
    (mix,) = [i for i in intervals if i.bottleneck == MIX and i.workload_class == "throughput"]
    point = WorkloadProfile(activity_ratio=1.0, memory_ratio=0.4, pcie_gbps=0.0, temp_c=60.0)
    at_default = outcome_under_limit(COEF, point, mix.default_limit_w)
    at_best = outcome_under_limit(COEF, point, mix.best_limit_w)
    assert mix.best_limit_w < mix.default_limit_w
    assert mix.perf_per_watt_gain_pct == pytest.approx(100 * (at_default.energy_ratio / at_best.energy_ratio - 1), abs=1e-6)
