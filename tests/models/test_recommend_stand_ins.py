"""A GPU that read no memory activity, PCIe traffic or temperature all day is scored with its
model's busy mean of the day in that measure, and its reason says so: taken as 0 GB/s, 0 and 60 C,
the simulated fleet's caps moved by 25-50 W on 12 of 16 GPUs for memory alone. Where no GPU of the
model read a measure its fit weighs, the GPU gets no setting; a missing activity is never idle."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.power import fit_day
from joulehouse.models.recommend import gpu_profile, recommend_day, recommend_gpu
from joulehouse.settings import ModelSettings, RecommendSettings
from power_synthetic import load_samples, synthetic_samples

A100 = "NVIDIA A100-SXM4-80GB"
DAY = dt.date(2026, 3, 2)
# Every side term weighs something, so a stand-in moves the cap and the saving.
COEF = PowerCoefficients(static_w=50, temp_w_per_c=0.8, dyn_w=300, dyn_freq_exponent=3.0, mem_w=80,
                         pcie_w_per_gbps=2.0, f_max_mhz=1410)


def _row(**values) -> dict:
    return {"host": "n1", "gpu_uuid": "GPU-1", "gpu_model": A100, "max_power_limit_w": 400.0, "busy_hours": 20.0,
            "n_samples": 5000, "sm_active_ratio": 0.7, "dram_ratio": 0.45, "util_gpu_ratio": 0.95,
            "util_mem_ratio": 0.5, "pcie_gbps": 6.0, "temp_c": 75.0, "activity_deciles": None, "p95_power_w": 380.0,
            **values}


def _recommend(row: dict, coef: PowerCoefficients = COEF, feature_set: str = "dcgm") -> dict:
    fit = coef.as_row() | {"passed_gate": True, "feature_set": feature_set, "gate_reason": None}
    return recommend_gpu(row, "background", fit, RecommendSettings(holdout_share=0.0), price_usd_per_kwh=0.1,
                         carbon_gco2e_per_kwh=0.0, carbon_price_usd_per_tco2e=0.0, pue=1.3, host_overhead_w=0.0)


@pytest.mark.parametrize("feature_set, column, name, fleet_mean, shown", [
    ("dcgm", "dram_ratio", "DRAM activity", 0.62, "(0.62)"),
    ("nvml", "util_mem_ratio", "memory utilisation", 0.62, "(0.62)"),
    ("dcgm", "pcie_gbps", "PCIe traffic", 20.0, "(20 GB/s)"),
    ("dcgm", "temp_c", "temperature", 50.0, "(50 C)"),
])
def test_a_measure_the_gpu_did_not_read_takes_its_models_mean_and_the_reason_says_so(feature_set, column, name,
                                                                                       fleet_mean, shown):
    missing = _recommend(_row(**{column: None, f"model_{column}": fleet_mean}), feature_set=feature_set)
    read = _recommend(_row(**{column: fleet_mean}), feature_set=feature_set)
    assert f"no {name} read: the {A100} GPUs' busy mean of the day {shown} stands in" in missing["reason"]
    assert missing["power_limit_w"] == read["power_limit_w"] and missing["power_limit_w"] < 400.0
    assert missing["expected_saving_pct"] == pytest.approx(read["expected_saving_pct"], rel=1e-12)
    assert missing["expected_slowdown_pct"] == pytest.approx(read["expected_slowdown_pct"], rel=1e-12)
    # the stand-in is what the saving rests on: the old 0 (or 60 C) gives another
    old_default = {"temp_c": 60.0}.get(column, 0.0)
    assert _recommend(_row(**{column: old_default}), feature_set=feature_set)["expected_saving_pct"] != pytest.approx(
        missing["expected_saving_pct"], abs=0.05)


@pytest.mark.parametrize("column, name, coefficient", [("dram_ratio", "DRAM activity", "mem_w"),
                                                       ("pcie_gbps", "PCIe traffic", "pcie_w_per_gbps"),
                                                       ("temp_c", "temperature", "temp_w_per_c")])
def test_a_measure_no_gpu_of_the_model_read_gets_no_setting_where_the_fit_weighs_it(column, name, coefficient):
    row = _recommend(_row(**{column: None, f"model_{column}": None}))
    assert row["power_limit_w"] is None and row["expected_saving_pct"] is None
    assert f"no {name} read on this GPU or any other {A100} GPU that day" in row["reason"]
    assert coefficient in row["reason"] and row["reason"].endswith("not recommended")


def test_a_measure_the_fit_gives_no_weight_is_scored_without_it_and_said():
    # An imported log without PCIe counters: its fit's PCIe coefficient is 0, so the traffic weighs
    # nothing in power; the GPU is still capped, and the reason says what was assumed.
    coef = PowerCoefficients(static_w=50, temp_w_per_c=0.8, dyn_w=300, dyn_freq_exponent=3.0, mem_w=80,
                             pcie_w_per_gbps=0.0, f_max_mhz=1410)
    row = _recommend(_row(pcie_gbps=None, model_pcie_gbps=None), coef)
    assert row["power_limit_w"] < 400.0
    assert f"no PCIe traffic read on any {A100} GPU that day; its power model gives it no weight" in row["reason"]
    assert row["expected_saving_pct"] == pytest.approx(_recommend(_row(pcie_gbps=0.0), coef)["expected_saving_pct"])


def test_a_missing_activity_is_no_profile_of_an_idle_gpu():
    # gpu_profile read a busy GPU without SM activity readings as activity 0: an idle GPU's profile.
    with pytest.raises(ValueError, match="no busy mean of sm_active.*how busy it was is unknown"):
        gpu_profile(_row(sm_active_ratio=None), "dcgm")
    with pytest.raises(ValueError, match="no busy mean of util_gpu"):
        gpu_profile(_row(util_gpu_ratio=None), "nvml")
    row = _recommend(_row(sm_active_ratio=None))
    assert row["power_limit_w"] is None and "idle" not in row["reason"]


def test_the_days_profile_carries_the_models_busy_mean_for_a_gpu_without_dram_readings():
    """Through the warehouse: one GPU's DRAM activity unread all day; its reason names the mean of
    the other GPUs' busy means (over their samples with SM activity above 5%), computed here by hand."""
    con = duckdb.connect()
    load_samples(con, synthetic_samples(seed=21, n_gpus=3, capped_limit_w=None))
    fit_day(con, DAY, ModelSettings())
    uuid = con.execute("SELECT min(gpu_uuid) FROM stg_gpu_samples").fetchone()[0]
    con.execute("UPDATE stg_gpu_samples SET dram_active_ratio = NULL WHERE gpu_uuid = ?", [uuid])
    (expected,) = con.execute("SELECT avg(busy_dram) FROM (SELECT avg(dram_active_ratio) AS busy_dram FROM stg_gpu_samples "
                              "WHERE day = ? AND power_w IS NOT NULL AND sm_active_ratio > 0.05 GROUP BY gpu_uuid)",
                              [DAY]).fetchone()
    recommend_day(con, DAY, RecommendSettings(holdout_share=0.0))
    (reason,) = con.execute("SELECT reason FROM fct_recommendation WHERE gpu_uuid = ?", [uuid]).fetchone()
    model = con.execute("SELECT any_value(gpu_model) FROM stg_gpu_samples WHERE gpu_uuid = ?", [uuid]).fetchone()[0]
    assert f"no DRAM activity read: the {model} GPUs' busy mean of the day ({expected:.3g}) stands in" in reason
