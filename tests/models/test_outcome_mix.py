"""A recommendation predicts a setting on its own day's work; the outcome measures the days after.
Where the work changed in between, the outcome row re-predicts the setting on the work that ran
(predicted_on_mix_*), and the report tells "the model was wrong" from "the work changed".

The demo's H200 GPU-13258358 at 350 W: predicted 11.4% / 1.4% on 06-11's (memory-bound and
clock-locked) work, realised 25.9% [23.9, 27.8] / 10.9% on 06-12's unlocked compute, flagged as a
broken promise though the simulator's truth for 06-12's work is 27.4% / 9.4%."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pyarrow as pa
import pytest

from joulehouse.collectors.writer import write_dataset
from joulehouse.models.efficiency import build_efficiency
from joulehouse.models.outcome import measure_outcomes
from joulehouse.models.sql import load_sql
from joulehouse.reports.page import outcome_checks
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect
from test_outcome_guards import D0, _at, _audit, _job

A100 = "NVIDIA A100-SXM4-80GB"
GPUS = ["GPU-T", "GPU-C1", "GPU-C2", "GPU-C3"]
DEFAULT_W, CAP_W = 400.0, 250.0
# The A100 fit (nvml: utilisation, memory utilisation): no temperature or PCIe term, alpha 3.
STATIC_W, DYN_W, MEM_W, ALPHA, F_MAX_MHZ = 60.0, 300.0, 60.0, 3.0, 1410.0
# (utilisation, memory utilisation) of the work: memory-bound on the recommendation day (day 1),
# compute-bound after the cap (day 2 all day, day 3 memory-bound for half of it and idle after).
MEMORY_BOUND, COMPUTE_BOUND = (0.6, 0.8), (0.95, 0.2)


def _work(day: int, minute: int) -> tuple[float, float]:
    if day == 2:
        return COMPUTE_BOUND
    if day == 3:
        return MEMORY_BOUND if minute < 720 else (0.0, 0.0)
    return MEMORY_BOUND


def _model_power_w(activity: float, memory: float, clock_ratio: float = 1.0) -> float:
    """The fit's power at a clock ratio: DRAM power thins as the run stretches (roofline time)."""
    stretch = max(activity / clock_ratio, memory) / max(activity, memory)
    return STATIC_W + DYN_W * activity * clock_ratio**ALPHA + MEM_W * memory / stretch


def _by_hand(activity: float, memory: float) -> tuple[float, float]:
    """(power W, run-time stretch) of the work at CAP_W: the clock where the fit's power meets the
    cap, by bisection (power rises with the clock), and the roofline time at it."""
    if _model_power_w(activity, memory) <= CAP_W:
        return _model_power_w(activity, memory), 1.0
    low, high = 0.3, 1.0
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if _model_power_w(activity, memory, mid) <= CAP_W else (low, mid)
    return CAP_W, max(activity / low, memory) / max(activity, memory)


def _saving_by_hand(days: list[tuple[float, tuple[float, float]]]) -> tuple[float, float]:
    """(saving %, slowdown %) of the cap over (busy hours, work) days against the default, which
    does not bind here (357 W and 288 W at full clock)."""
    before = sum(h * _model_power_w(*work) for h, work in days)
    after = sum(h * _by_hand(*work)[0] * _by_hand(*work)[1] for h, work in days)
    hours_after = sum(h * _by_hand(*work)[1] for h, work in days)
    return 100 * (1 - after / before), 100 * (hours_after / sum(h for h, _ in days) - 1)


# What the day-1 recommendation promised: the cap on day 1's memory-bound work.
PROMISED_SAVING_PCT, PROMISED_SLOWDOWN_PCT = _saving_by_hand([(24.0, MEMORY_BOUND)])


def _warehouse(tmp_path):
    """Four days of 1-minute readings: GPU-T capped 400 -> 250 W from day 2 by day 1's
    recommendation, three controls at 400 W doing the same work; built, and the day-1 fit stored."""
    rows = []
    for index, gpu in enumerate(GPUS):
        counter_j = 0.0
        for day in range(4):
            limit_w = CAP_W if gpu == "GPU-T" and day >= 2 else DEFAULT_W
            for minute in range(1440):
                activity, memory = _work(day, minute)
                power_w = min(_model_power_w(activity, memory) if activity else STATIC_W, limit_w)
                rows.append(dict(sampled_at=_at(day, minute), host="node-01", gpu_index=index, gpu_uuid=gpu,
                                 gpu_model=A100, power_w=power_w, util_gpu_pct=100 * activity,
                                 util_mem_pct=100 * memory, energy_mj_total=int(counter_j * 1000),
                                 power_limit_w=limit_w, source="nvml"))
                counter_j += power_w * 60
    lake = tmp_path / "lake"
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))
    write_dataset(lake, "jobs", pa.Table.from_pylist([_job(f"j-{g}-{d}", g, d, flops_total=1e18)
                                                      for d in range(4) for g in GPUS]))
    write_dataset(lake, "agent_audit", pa.Table.from_pylist([_audit(2, "apply", DEFAULT_W, CAP_W)]))
    con = connect(tmp_path / "w.duckdb", lake)
    for day in range(4):
        build_day(con, D0 + dt.timedelta(days=day), WarehouseSettings(), now=dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc))
        build_efficiency(con, D0 + dt.timedelta(days=day))
    day1 = D0 + dt.timedelta(days=1)
    con.execute(load_sql("fct_power_model"))
    con.execute("INSERT INTO fct_power_model (gpu_model, day, fitted_at, feature_set, static_w, temp_w_per_c, dyn_w, "
                "dyn_freq_exponent, mem_w, pcie_w_per_gbps, f_max_mhz, activity_exponent, activity_hold_s, passed_gate) "
                "VALUES (?, ?, ?, 'nvml', ?, 0, ?, ?, ?, 0, ?, 1, 0, true)",
                [A100, day1, dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc), STATIC_W, DYN_W, ALPHA, MEM_W, F_MAX_MHZ])
    con.execute(load_sql("fct_recommendation"))
    con.execute("INSERT INTO fct_recommendation (day, host, gpu_uuid, gpu_model, workload_class, power_limit_w, "
                "default_limit_w, expected_saving_pct, expected_slowdown_pct) VALUES (?, 'node-01', 'GPU-T', ?, "
                "'throughput', ?, ?, ?, ?)", [day1, A100, CAP_W, DEFAULT_W, PROMISED_SAVING_PCT, PROMISED_SLOWDOWN_PCT])
    return con


def test_the_setting_is_re_predicted_on_the_work_that_ran_after_it(tmp_path):
    """Day 1 ran memory-bound work (60% utilisation, 80% memory): the 250 W cap was promised
    13.2% for 0% slower. After it, 24 h of compute-bound work (95%, 20%) and 12 h memory-bound:
    the same fit and cap on that work give 16.9% for 11.1% slower, the days weighted 2:1 by their
    busy hours. The promise stays as it was, beside it."""
    con = _warehouse(tmp_path)
    measure_outcomes(con, D0 + dt.timedelta(days=3))
    rows = {r[0] or "pooled": r[1:] for r in con.execute(
        "SELECT gpu_uuid, predicted_saving_pct, predicted_slowdown_pct, predicted_on_mix_saving_pct, "
        "predicted_on_mix_slowdown_pct, realised_saving_pct FROM fct_recommendation_outcome").fetchall()}
    saving, slowdown = _saving_by_hand([(24.0, COMPUTE_BOUND), (12.0, MEMORY_BOUND)])
    assert PROMISED_SAVING_PCT == pytest.approx(13.19, abs=0.01) and PROMISED_SLOWDOWN_PCT == pytest.approx(0.0)
    assert (saving, slowdown) == (pytest.approx(16.86, abs=0.01), pytest.approx(11.08, abs=0.01))
    promised, promised_slowdown, on_mix, on_mix_slowdown, realised = rows["GPU-T"]
    assert (promised, promised_slowdown) == (pytest.approx(PROMISED_SAVING_PCT), pytest.approx(PROMISED_SLOWDOWN_PCT))
    assert on_mix == pytest.approx(saving, abs=1e-6) and on_mix_slowdown == pytest.approx(slowdown, abs=1e-6)
    assert realised is not None  # measured, so the pooled row is of GPU-T, and re-predicts it
    assert rows["pooled"][2:4] == (pytest.approx(on_mix), pytest.approx(on_mix_slowdown))


def test_the_re_prediction_is_the_recommenders_own_scoring_of_the_after_day():
    """On one after day the re-prediction is what recommend_gpu gives that day's profile for the
    same cap (its bound and limit steps leave it the cap alone to choose)."""
    from joulehouse.models.limit_change import Change
    from joulehouse.models.outcome_reprediction import Applied, repredict
    from joulehouse.models.recommend import recommend_gpu
    from joulehouse.models.settings import RecommendSettings

    day = D0 + dt.timedelta(days=2)
    fit = {"gpu_model": A100, "feature_set": "nvml", "static_w": STATIC_W, "temp_w_per_c": 0.0, "dyn_w": DYN_W,
           "dyn_freq_exponent": ALPHA, "mem_w": MEM_W, "pcie_w_per_gbps": 0.0, "f_max_mhz": F_MAX_MHZ,
           "activity_exponent": 1.0, "activity_hold_s": 0.0, "passed_gate": True, "gate_reason": None}
    profile = {"host": "node-01", "gpu_uuid": "GPU-T", "gpu_model": A100, "n_samples": 1440, "busy_ratio": 1.0,
               "busy_hours": 24.0, "util_gpu_ratio": 0.95, "util_mem_ratio": 0.2, "temp_c": None, "pcie_gbps": None,
               "activity_deciles": [0.95] * 10, "deciles_activity_kind": "util_gpu", "memory_deciles": [0.2] * 10,
               "max_power_limit_w": DEFAULT_W, "p95_power_w": 357.0}
    settings = RecommendSettings(max_slowdown_throughput_pct=50.0, limit_step_w=DEFAULT_W - CAP_W,
                                 min_limit_share_of_default=CAP_W / DEFAULT_W)
    recommended = recommend_gpu(profile, "throughput", fit, settings, price_usd_per_kwh=0.1, carbon_gco2e_per_kwh=0.0,
                                carbon_price_usd_per_tco2e=0.0, pue=1.0)
    assert recommended["power_limit_w"] == CAP_W and recommended["locked_sm_clock_max_mhz"] is None
    change = Change("GPU-T", "node-01", A100, day, DEFAULT_W, CAP_W, (day - dt.timedelta(days=1),), (day,))
    saving, slowdown, why = repredict(change, Applied(fit, day, None), lambda d: {"GPU-T": profile})
    assert why is None
    assert saving == pytest.approx(recommended["expected_saving_pct"], abs=1e-9)
    assert slowdown == pytest.approx(recommended["expected_slowdown_pct"], abs=1e-9)
    assert (saving, slowdown) == tuple(pytest.approx(v, abs=1e-6) for v in _saving_by_hand([(24.0, COMPUTE_BOUND)]))


def _gpu(**figures) -> pl.DataFrame:
    """The report's per-GPU outcome row of the demo's H200 (throughput, bound 10%), with `figures`."""
    row = {"host": "node-04", "gpu_uuid": "GPU-13258358", "gpu_model": "NVIDIA H200", "workload_class": "throughput",
           "max_slowdown_pct": 10.0, "recommended_day": dt.date(2026, 6, 11), "power_limit_w_before": 700.0,
           "power_limit_w_after": 350.0, "realised_saving_pct": 25.9, "saving_ci_low_pct": 23.9,
           "saving_ci_high_pct": 27.8, "predicted_saving_pct": 11.4, "realised_slowdown_pct": 10.9,
           "predicted_slowdown_pct": 1.4, "predicted_on_mix_saving_pct": 24.6, "predicted_on_mix_slowdown_pct": 10.007,
           "note": None}
    return pl.DataFrame([row | figures])


def test_the_work_that_changed_is_said_so_not_flagged_as_a_broken_promise():
    """The demo's H200: 25.9% realised where 11.4% was promised, but 24.6% on the work that ran
    (inside [23.9, 27.8]); 10.9% slower beyond the 10% bound, and the work that ran needs 10.007%."""
    gpus = _gpu()
    assert outcome_checks.broken_promises(gpus) == []
    [sentence] = outcome_checks.work_changed(gpus)
    assert sentence == ("node-04 GPU-13258358 (NVIDIA H200, throughput, 700 -> 350 W): slowed 10.9%, beyond the "
                        "throughput class's bound of 10%, as the work that ran needs (10.01% predicted on it, 1.4% "
                        "on 2026-06-11's work); saved 25.9% (95% interval 23.9 to 27.8%) where 11.4% was predicted on "
                        "2026-06-11's work and 24.6% is on the work that ran")
    coverage = outcome_checks.coverage_sentence(gpus)
    assert sentence in coverage and "not a broken promise" in coverage


def test_a_realised_figure_the_work_that_ran_does_not_explain_is_the_models_miss():
    """Re-predicted 18.0% on the work that ran, outside [23.9, 27.8], and 6.0% slower, within the
    bound the GPU broke: the model missed, both flags stay, with what the work that ran predicts."""
    gpus = _gpu(predicted_on_mix_saving_pct=18.0, predicted_on_mix_slowdown_pct=6.0)
    [sentence] = outcome_checks.broken_promises(gpus)
    assert sentence == ("node-04 GPU-13258358 (NVIDIA H200, throughput, 700 -> 350 W): slowed 10.9%, beyond the "
                        "throughput class's bound of 10% (6.0% predicted on the work that ran, 1.4% on 2026-06-11's "
                        "work); saved 25.9% (95% interval 23.9 to 27.8%) where 18.0% is predicted on the work that "
                        "ran (11.4% on 2026-06-11's work), outside the interval")
    assert outcome_checks.work_changed(gpus) == []


def test_without_a_re_prediction_the_promise_is_all_there_is_to_hold_it_to():
    gpus = _gpu(predicted_on_mix_saving_pct=None, predicted_on_mix_slowdown_pct=None)
    assert outcome_checks.broken_promises(gpus) == [
        "node-04 GPU-13258358 (NVIDIA H200, throughput, 700 -> 350 W): slowed 10.9%, beyond the throughput class's "
        "bound of 10% (1.4% predicted); saved 25.9% (95% interval 23.9 to 27.8%) where 11.4% was predicted, outside "
        "the interval"]
    assert outcome_checks.work_changed(gpus) == []
