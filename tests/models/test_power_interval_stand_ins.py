"""A bottleneck row's memory, PCIe or temperature mean that none of its samples read is filled as
the recommender fills a GPU's (models.recommend_inputs.with_stand_ins), not taken as 0 or 60 C.

The A100s below: one runs compute-bound work and reads no temperature, the other memory-bound work
at 80 C. The compute-bound row was drawn at 60 C, an operating point nobody measured; with a fit
that weighs temperature (2 W/C), that is 40 W of static power the row left out: its interval
read 310-315 W (7.4% gain), where its model's 80 C gives 345-355 W (5.5%). A group that read no
DRAM activity was drawn at 0 likewise: 230 W (12.9%) where the model's mean gives 260 W (10.9%).
"""

from __future__ import annotations

import datetime as dt
import logging

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from joulehouse.collectors.schema import conform
from joulehouse.models.caps import WorkloadProfile, outcome_under_limit
from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.power_interval import MIX, PowerInterval, power_interval_day
from joulehouse.models.settings import RecommendSettings
from joulehouse.models.sql import SQL
from joulehouse.warehouse.sqlio import replace_day_rows
from power_synthetic import load_samples

DAY = dt.date(2026, 3, 2)
A100 = "NVIDIA A100-SXM4-80GB"
COMPUTE_BOUND, MEMORY_BOUND = (0.75, 0.25), (0.25, 0.75)  # (SM, DRAM) activity, exact in binary
HOT_C = 80.0


def _fit(temp_w_per_c: float) -> PowerCoefficients:
    return PowerCoefficients(static_w=60.0, temp_w_per_c=temp_w_per_c, dyn_w=300.0, dyn_freq_exponent=3.0, mem_w=40.0,
                             pcie_w_per_gbps=0.0, f_max_mhz=1410.0)


def _gpu_samples(gpu_uuid: str, sm_and_dram: tuple[float, float | None], temp_c: float | None) -> pa.Table:
    """One DCGM-read A100 busy for 2 h at 10 s at one operating point; DRAM activity or temperature
    NULL where None."""
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    n = 720
    table = conform("gpu_samples", pa.table({
        "sampled_at": pa.array([start + dt.timedelta(seconds=10 * i) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "host": ["node-01"] * n, "gpu_index": np.zeros(n, np.int16), "gpu_uuid": [gpu_uuid] * n,
        "gpu_model": [A100] * n, "power_w": np.full(n, 300.0, np.float32),
        "temp_c": pa.array([temp_c] * n, pa.float32()), "sm_clock_mhz": np.full(n, 1410, np.int32),
        "sm_active_ratio": np.full(n, sm_and_dram[0], np.float32),
        "dram_active_ratio": pa.array([sm_and_dram[1]] * n, pa.float32()),
        "power_limit_w": np.full(n, 400.0, np.float32), "clock_event_reasons": np.zeros(n, np.int64),
        "source": ["dcgm-exporter"] * n}))
    return table.append_column("day", pa.array([DAY] * n, pa.date32()))


def _intervals(coef: PowerCoefficients, hot_gpu_reads_temperature: bool, cold_gpu_reads_dram: bool = True,
               ) -> dict[str, PowerInterval]:
    """The throughput intervals by bottleneck: GPU-cold runs compute-bound work and reads no
    temperature (nor DRAM activity, unless `cold_gpu_reads_dram`); GPU-hot runs memory-bound work
    at HOT_C (or reads no temperature either)."""
    con = duckdb.connect()
    load_samples(con, _gpu_samples("GPU-cold", COMPUTE_BOUND if cold_gpu_reads_dram else (COMPUTE_BOUND[0], None), None))
    load_samples(con, _gpu_samples("GPU-hot", MEMORY_BOUND, HOT_C if hot_gpu_reads_temperature else None))
    SQL.execute(con, "fct_power_model")
    replace_day_rows(con, DAY, {"fct_power_model": [coef.as_row() | {
        "gpu_model": A100, "day": DAY, "fitted_at": dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc),
        "feature_set": "dcgm", "n_samples": 100_000, "passed_gate": True}]})
    intervals, _ = power_interval_day(con, DAY, RecommendSettings())
    return {i.bottleneck: i for i in intervals if i.workload_class == "throughput"}


def _gain_pct(coef: PowerCoefficients, point: WorkloadProfile, interval: PowerInterval) -> float:
    """Work per joule at the interval's best limit over that at its default, minus 100 (models.caps)."""
    at_default = outcome_under_limit(coef, point, interval.default_limit_w)
    at_best = outcome_under_limit(coef, point, interval.best_limit_w)
    return 100 * (at_default.energy_ratio / at_best.energy_ratio - 1)


def test_a_group_that_read_no_temperature_is_drawn_at_its_models_busy_mean_of_the_day():
    coef = _fit(temp_w_per_c=2.0)
    compute = _intervals(coef, hot_gpu_reads_temperature=True)["compute-bound"]
    at_model_mean = WorkloadProfile(activity_ratio=COMPUTE_BOUND[0], memory_ratio=COMPUTE_BOUND[1], temp_c=HOT_C)
    at_60_c = WorkloadProfile(activity_ratio=COMPUTE_BOUND[0], memory_ratio=COMPUTE_BOUND[1], temp_c=60.0)
    assert compute.perf_per_watt_gain_pct == pytest.approx(_gain_pct(coef, at_model_mean, compute), abs=1e-9)
    assert compute.perf_per_watt_gain_pct != pytest.approx(_gain_pct(coef, at_60_c, compute), abs=1e-3)


def test_a_group_that_read_no_dram_activity_is_drawn_at_its_models_busy_mean_not_at_0():
    """Drawn at DRAM 0 where the fit gives DRAM 40 W, the row left out the 30 W of its model's mean (0.75)."""
    coef = _fit(temp_w_per_c=0.0)
    compute = _intervals(coef, hot_gpu_reads_temperature=True, cold_gpu_reads_dram=False)["compute-bound"]
    at_model_mean = WorkloadProfile(activity_ratio=COMPUTE_BOUND[0], memory_ratio=MEMORY_BOUND[1])
    at_0 = WorkloadProfile(activity_ratio=COMPUTE_BOUND[0], memory_ratio=0.0)
    assert compute.perf_per_watt_gain_pct == pytest.approx(_gain_pct(coef, at_model_mean, compute), abs=1e-9)
    assert compute.perf_per_watt_gain_pct != pytest.approx(_gain_pct(coef, at_0, compute), abs=1e-3)


def test_no_temperature_on_any_gpu_of_a_model_whose_fit_weighs_it_gives_no_row_and_says_why(caplog):
    with caplog.at_level(logging.WARNING, logger="joulehouse.models.power_interval"):
        rows = _intervals(_fit(temp_w_per_c=2.0), hot_gpu_reads_temperature=False)
    assert rows == {}  # not curves drawn at 60 C
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("no compute-bound curve" in w and "temperature" in w and "temp_w_per_c" in w for w in warnings), warnings


def test_a_temperature_the_fit_gives_no_weight_is_not_needed():
    coef = _fit(temp_w_per_c=0.0)
    rows = _intervals(coef, hot_gpu_reads_temperature=False)
    assert rows.keys() == {"compute-bound", "memory-bound", MIX}
    for bottleneck, (sm, dram) in (("compute-bound", COMPUTE_BOUND), ("memory-bound", MEMORY_BOUND)):
        point = WorkloadProfile(activity_ratio=sm, memory_ratio=dram)
        assert rows[bottleneck].perf_per_watt_gain_pct == pytest.approx(_gain_pct(coef, point, rows[bottleneck]), abs=1e-9)
