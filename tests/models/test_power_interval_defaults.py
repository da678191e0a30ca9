"""The power interval's device limits are the recommender's: an unknown GPU model's default does
not follow the caps the agent applied down (models.power_interval beside models.recommend)."""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.models.power import fit_day
from joulehouse.models.power_interval import power_interval_day
from joulehouse.models.recommend import DEVICE_LIMITS_W, recommend_day
from joulehouse.settings import ModelSettings, RecommendSettings
from power_synthetic import TruePower, load_samples, synthetic_samples

DAY = dt.date(2026, 3, 2)
UNKNOWN_MODEL = "NVIDIA A800-SXM4-80GB"


def test_an_unknown_models_interval_keeps_the_default_the_recommender_keeps_once_caps_are_applied():
    """Day 0 at the 400 W limit: the recommender caps the two (throughput) GPUs at 250 and 275 W.
    Day 1's readings show only those caps; the recommender keeps 400 W as the default (earlier
    days' figure), but the interval took the highest limit of its first bottleneck's samples,
    250 W: curves ending at 250 W, its floor at 125 W, and gains counted from a 250 W run."""
    assert UNKNOWN_MODEL not in DEVICE_LIMITS_W
    con = duckdb.connect()
    settings = RecommendSettings(holdout_share=0.0)
    limit_w = TruePower().limit_w
    for k in range(2):
        day = DAY + dt.timedelta(days=k)
        start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
        load_samples(con, synthetic_samples(gpu_model=UNKNOWN_MODEL, truth=TruePower(limit_w=limit_w), seed=21,
                                            n_gpus=2, capped_limit_w=None, start=start))
        fit_day(con, day, ModelSettings())
        recommend_day(con, day, settings)
        intervals, curve = power_interval_day(con, day, settings)
        recommended = con.execute("SELECT default_limit_w, power_limit_w FROM fct_recommendation WHERE day = ?",
                                  [day]).fetchall()
        assert {d for d, _ in recommended} == {TruePower().limit_w}
        assert intervals, "the day has intervals (else the test shows nothing)"
        floor_w = settings.min_limit_share_of_default * TruePower().limit_w
        for i in intervals:
            assert i.default_limit_w == TruePower().limit_w, (k, i)
            assert floor_w - 1e-9 <= i.best_limit_w_low <= i.best_limit_w <= i.best_limit_w_high <= i.default_limit_w
        assert max(r["power_limit_w"] for r in curve) == TruePower().limit_w
        limit_w = min(w for _, w in recommended)  # the agent applied it: the next day's readings show the cap
    assert limit_w < TruePower().limit_w, "day 0 recommended a cap (else the test shows nothing)"
