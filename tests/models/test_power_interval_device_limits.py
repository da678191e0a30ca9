"""The power interval sweeps the limits the recommender sets from: the device's own (NVML's default
and limit constraints, kept per GPU-day in fct_gpu_coverage_daily) where it reported them.

Measured before (min_limit_share_of_default 0.3, the hand-made fit below): a 500 W board of the
400 W A100's NVML name, read under a 300 W cap on its first day, was capped at 225 W from its
500 W default by the recommender, while its curve ran 100-400 W (the catalogue's) and its
background interval was 170 W, below the 200 W the device accepts. An unknown model reporting a
150 W minimum was capped at 175 W, while its curve began at a guessed 200 W (half its limit),
where nothing saves: its interval said 400 W, no gain. Lake files are written by hand
(test_device_reported_limits), the warehouse built from them."""

from __future__ import annotations

import datetime as dt
import logging

import pytest

from joulehouse.models.device_limits import EarlierDefaults
from joulehouse.models.power_interval import MIX, _model_limits_w, power_interval_day
from joulehouse.models.recommend import recommend_day
from joulehouse.models.sql import SQL
from joulehouse.settings import RecommendSettings, WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect
from joulehouse.warehouse.sqlio import replace_day_rows
from test_device_reported_limits import A100, COEF, DAY_1, NOW, SETTINGS, UNKNOWN, _put, _readings


def _interval_and_recommendation(tmp_path, model: str, limit_w: float, device_w: tuple[float, float, float],
                                 sm_active: float) -> tuple[list, list[dict], dict]:
    """One GPU's day built into a warehouse with its model's fit (COEF, by hand): the day's
    intervals, curve rows, and its fct_recommendation row."""
    lake = tmp_path / "lake"
    _put(lake, DAY_1, "node-a", _readings(DAY_1, "GPU-X", model, limit_w, device_w=device_w, sm_active=sm_active),
         "nvml.parquet")
    con = connect(tmp_path / "w.duckdb", lake)
    build_day(con, DAY_1, WarehouseSettings(), now=NOW)
    SQL.execute(con, "fct_power_model")
    replace_day_rows(con, DAY_1, {"fct_power_model": [COEF.as_row() | {
        "gpu_model": model, "day": DAY_1, "fitted_at": dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc),
        "feature_set": "dcgm", "n_samples": 100_000, "passed_gate": True}]})
    recommend_day(con, DAY_1, SETTINGS)
    (recommended,) = [dict(zip(("workload_class", "default_limit_w", "power_limit_w"), r)) for r in con.execute(
        "SELECT workload_class, default_limit_w, power_limit_w FROM fct_recommendation WHERE day = ?",
        [DAY_1]).fetchall()]
    intervals, curve = power_interval_day(con, DAY_1, SETTINGS)
    return intervals, curve, recommended


@pytest.mark.slow
@pytest.mark.parametrize(("model", "limit_w", "device_w", "sm_active"), [
    (A100, 300.0, (500.0, 200.0, 500.0), 0.5),  # a 500 W board under the agent's cap, its first day seen
    (UNKNOWN, 400.0, (400.0, 150.0, 450.0), 0.3),  # a model the catalogue lacks: its minimum not guessed
], ids=["500W-board-capped", "unknown-model"])
def test_the_curve_spans_the_device_limits_the_recommender_caps_within(tmp_path, model, limit_w, device_w, sm_active):
    intervals, curve, recommended = _interval_and_recommendation(tmp_path, model, limit_w, device_w, sm_active)
    default_w, min_w, _ = device_w
    assert recommended["default_limit_w"] == default_w and recommended["power_limit_w"] < default_w
    assert (min(r["power_limit_w"] for r in curve), max(r["power_limit_w"] for r in curve)) == (min_w, default_w)
    assert intervals
    for i in intervals:
        assert i.default_limit_w == default_w, i
        assert min_w <= i.best_limit_w_low <= i.best_limit_w <= i.best_limit_w_high <= default_w, i
    # the throughput GPUs' row (the headline's) sits by the cap set on the GPU: within one of its steps
    (mix,) = [i for i in intervals if i.bottleneck == MIX and i.workload_class == recommended["workload_class"]]
    assert abs(mix.best_limit_w - recommended["power_limit_w"]) < SETTINGS.limit_step_w, (mix, recommended)
    assert mix.perf_per_watt_gain_pct > 0


def test_a_gpu_whose_reported_limits_contradict_themselves_is_left_out_of_its_models_limits_and_said_so(caplog):
    """The recommender gives such a GPU no setting (device_limits_w's ValueError); the model's curve
    takes the other GPUs' limits, and the log names the one left out."""
    earlier = EarlierDefaults(audited_w={}, gpu_w={}, model_w={})
    good = {"gpu_uuid": "GPU-good", "max_power_limit_w": 400.0, "power_limit_default_w": 400.0,
            "power_limit_min_w": 150.0, "power_limit_max_w": 450.0}
    bad = good | {"gpu_uuid": "GPU-bad", "power_limit_default_w": 300.0, "power_limit_min_w": 350.0}
    with caplog.at_level(logging.WARNING, logger="joulehouse.models.power_interval"):
        assert _model_limits_w(UNKNOWN, [bad, good], earlier, DAY_1) == (400.0, 150.0)
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "GPU-bad" in warning and "350 W minimum limit above its default 300 W" in warning
    with pytest.raises(ValueError, match="350 W minimum limit above its default"):
        _model_limits_w(UNKNOWN, [bad], earlier, DAY_1)
