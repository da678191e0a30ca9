"""The recommender's predicted slowdown and saving agree with the project's own energy-vs-limit
curve (fct_energy_vs_limit) for a GPU whose day mixes compute-bound and memory-bound work.

A cap costs each phase what its own bottleneck says: a compute-bound phase slows as 1/clock, a
memory-bound one not until its SM time catches up with its DRAM time. The recommender scores a GPU
on tenths of its busy activity; with memory activity held at the day's busy mean in every tenth,
the memory-bound tenths (SM 0.6 against a mean DRAM of 0.55) read as compute-bound: an H200-like
GPU capped at 350 W was promised ~2.9% slower and ~7.8% saving on the demo where its own samples
give ~1.7% and ~13%.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from joulehouse.collectors.schema import conform
from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.power_interval import power_interval_day
from joulehouse.models.recommend import recommend_day
from joulehouse.models.recommend_inputs import gpu_day_profiles
from joulehouse.models.sql import SQL
from joulehouse.settings import RecommendSettings
from joulehouse.warehouse.sqlio import records, replace_day_rows
from power_synthetic import load_samples

DAY = dt.date(2026, 6, 11)
H200 = "NVIDIA H200"
# By hand, near the demo's H200 fit (static 68 W, dyn 500 W, alpha 4.5, mem 137 W); no temperature
# or PCIe term, so those measures weigh nothing.
COEF = PowerCoefficients(static_w=70.0, temp_w_per_c=0.0, dyn_w=500.0, dyn_freq_exponent=4.5, mem_w=140.0,
                         pcie_w_per_gbps=0.0, f_max_mhz=1980.0)
# (SM activity, DRAM activity) of the day's two kinds of work, 30 minutes each in turn over 8 hours:
# training that the SMs bound, and training that DRAM bounds (the simulator's train-memory).
COMPUTE_PHASE = (0.9, 0.3)
MEMORY_PHASE = (0.6, 0.8)
INTERVAL_S = 10


def _warehouse() -> duckdb.DuckDBPyConnection:
    """One H200 busy all day at its 700 W default, read by DCGM every 10 s, and its model's fit."""
    start = dt.datetime(2026, 6, 11, tzinfo=dt.timezone.utc)
    n = 8 * 3600 // INTERVAL_S
    compute = (np.arange(n) * INTERVAL_S // 1800) % 2 == 0
    sm_active = np.where(compute, COMPUTE_PHASE[0], MEMORY_PHASE[0])
    dram = np.where(compute, COMPUTE_PHASE[1], MEMORY_PHASE[1])
    power_w = COEF.predict_power_w(activity_ratio=sm_active, memory_ratio=dram)
    table = conform("gpu_samples", pa.table({
        "sampled_at": pa.array([start + dt.timedelta(seconds=INTERVAL_S * i) for i in range(n)],
                               pa.timestamp("us", tz="UTC")),
        "host": ["node-04"] * n, "gpu_index": np.zeros(n, np.int16), "gpu_uuid": ["GPU-h200"] * n, "gpu_model": [H200] * n,
        "power_w": power_w.astype(np.float32), "temp_c": np.full(n, 55.0, np.float32),
        "sm_clock_mhz": np.full(n, 1980, np.int32), "util_gpu_pct": np.full(n, 100.0, np.float32),
        "util_mem_pct": (100 * dram).astype(np.float32), "sm_active_ratio": sm_active.astype(np.float32),
        "dram_active_ratio": dram.astype(np.float32), "power_limit_w": np.full(n, 700.0, np.float32),
        "clock_event_reasons": np.zeros(n, np.int64), "source": ["dcgm-exporter"] * n}))
    con = duckdb.connect()
    load_samples(con, table.append_column("day", pa.array([DAY] * n, pa.date32())))
    SQL.execute(con, "fct_power_model")
    replace_day_rows(con, DAY, {"fct_power_model": [COEF.as_row() | {
        "gpu_model": H200, "day": DAY, "fitted_at": start, "feature_set": "dcgm", "n_samples": 100_000,
        "passed_gate": True}]})
    return con


def test_each_tenth_carries_its_own_memory_activity():
    (profile,) = gpu_day_profiles(_warehouse(), DAY)
    # the five lighter tenths are the memory-bound half, the five heavier the compute-bound half
    assert profile["activity_deciles"] == pytest.approx([MEMORY_PHASE[0]] * 5 + [COMPUTE_PHASE[0]] * 5, abs=2e-3)
    assert profile["memory_deciles"] == pytest.approx([MEMORY_PHASE[1]] * 5 + [COMPUTE_PHASE[1]] * 5, abs=1e-5)
    assert profile["temp_c_deciles"] == pytest.approx([55.0] * 10)


def test_a_cap_costs_a_mixed_gpu_what_the_energy_vs_limit_curve_says_each_of_its_phases_costs():
    """The recommended cap's expected slowdown and saving are those of the day's two halves read off
    fct_energy_vs_limit (compute-bound and memory-bound curves, half the busy time each; the 700 W
    default binds on neither, so each curve's run time and power at the default are the uncapped ones)."""
    con = _warehouse()
    recommend_day(con, DAY, RecommendSettings(holdout_share=0.0))
    (row,) = records(con.execute("SELECT * FROM fct_recommendation"))
    assert row["workload_class"] == "throughput" and row["power_limit_w"] < row["default_limit_w"] == 700.0
    power_interval_day(con, DAY, RecommendSettings())
    curve = {(r["bottleneck"], r["power_limit_w"]): r for r in records(con.execute(
        "SELECT * FROM fct_energy_vs_limit WHERE power_limit_w IN ($cap, 700)", {"cap": row["power_limit_w"]}))}
    halves = ("compute-bound", "memory-bound")
    time = sum(curve[(b, row["power_limit_w"])]["relative_time"] for b in halves) / 2
    energy = sum(curve[(b, row["power_limit_w"])]["energy_kwh"] for b in halves)
    energy_at_default = sum(curve[(b, 700.0)]["energy_kwh"] for b in halves)
    assert curve[("memory-bound", row["power_limit_w"])]["relative_time"] < curve[("compute-bound", row["power_limit_w"])]["relative_time"]
    assert row["expected_slowdown_pct"] == pytest.approx(100 * (time - 1), abs=0.05)
    assert row["expected_saving_pct"] == pytest.approx(100 * (1 - energy / energy_at_default), abs=0.05)
