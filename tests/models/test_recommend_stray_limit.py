"""A stray power-limit reading (one corrupt or mistyped power_limit_w in an imported log) is not the
GPU's default limit: the recommender and the power interval take the highest limit a GPU held a
while (models/sql/recommend_gpu_profile.sql), so a board built for more keeps its own default."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lanes import examples

from joulehouse.models.power import fit_day
from joulehouse.models.power_interval import power_interval_day
from joulehouse.models.recommend import device_limits_w, recommend_day
from joulehouse.models.recommend_inputs import gpu_day_profiles
from joulehouse.settings import ModelSettings, RecommendSettings
from power_synthetic import load_samples, synthetic_samples

DAY = dt.date(2026, 3, 2)
A100 = "NVIDIA A100-SXM4-80GB"
SEED = 21
N_GPUS = 3
READINGS_PER_GPU = 2160  # synthetic_samples: 6 h at 10 s
FIRST_HOUR_READINGS = 360


def _uuid(gpu: int) -> str:
    return f"GPU-node-01-{gpu}-{SEED}"


def _day_of_boards(con: duckdb.DuckDBPyConnection) -> None:
    """GPU 0 a 400 W A100 board all day; GPU 1 a 500 W HGX board with the 400 W board's NVML name;
    GPU 2 the same 500 W board, capped at 300 W by the agent after its first hour."""
    load_samples(con, synthetic_samples(seed=SEED, n_gpus=N_GPUS, capped_limit_w=None))
    con.execute("UPDATE stg_gpu_samples SET power_limit_w = 500 WHERE gpu_uuid IN (?, ?)", [_uuid(1), _uuid(2)])
    con.execute("UPDATE stg_gpu_samples SET power_limit_w = 300 WHERE gpu_uuid = ? AND sampled_at >= ?",
                [_uuid(2), dt.datetime(2026, 3, 2, 1, tzinfo=dt.timezone.utc)])


def _set_stray_limit(con: duckdb.DuckDBPyConnection, gpu: int, reading: int, limit_w: float) -> None:
    at = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=10 * reading)
    con.execute("UPDATE stg_gpu_samples SET power_limit_w = ? WHERE gpu_uuid = ? AND sampled_at = ?",
                [limit_w, _uuid(gpu), at])


def _default_limits_w(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    return {p["gpu_uuid"]: device_limits_w(p["gpu_model"], p["max_power_limit_w"])[0]
            for p in gpu_day_profiles(con, DAY, fits={})}


def test_a_board_built_for_more_keeps_its_default_even_when_capped_after_an_hour():
    con = duckdb.connect()
    _day_of_boards(con)
    assert _default_limits_w(con) == {_uuid(0): 400.0, _uuid(1): 500.0, _uuid(2): 500.0}


stray_readings = st.lists(st.tuples(st.integers(0, N_GPUS - 1), st.integers(0, READINGS_PER_GPU - 1),
                                    st.floats(1.0, 5000.0, allow_nan=False)), min_size=1, max_size=5)


@settings(max_examples=examples(20), deadline=None)
@given(strays=stray_readings)
def test_a_few_stray_limit_readings_never_change_a_gpus_default_limit(strays):
    """One mistyped 4000 W among an A100's 2,160 readings became its default and maximum: "keep the
    default" meant 4000 W and its cap floor 2000 W."""
    con = duckdb.connect()
    _day_of_boards(con)
    clean = _default_limits_w(con)
    for gpu, reading, limit_w in strays:
        _set_stray_limit(con, gpu, reading, limit_w)
    assert _default_limits_w(con) == clean


@pytest.mark.slow
def test_one_stray_limit_reading_leaves_the_recommendation_and_the_interval_as_they_were_and_is_said():
    """Before: GPU 1's default became 4000 W, its cap floor 2000 W, so it got a clock lock "saving"
    7.1% (0.101 kWh/day) counted from a run without a limit, where the clean day caps it at 275 W
    (3.9%); and every power interval of the model ended at 4000 W."""
    settings_ = RecommendSettings(holdout_share=0.0)
    days = {}
    for stray_w in (None, 4000.0):
        con = duckdb.connect()
        load_samples(con, synthetic_samples(seed=SEED, n_gpus=N_GPUS, capped_limit_w=None))
        fit_day(con, DAY, ModelSettings())
        if stray_w is not None:
            _set_stray_limit(con, 1, READINGS_PER_GPU // 2, stray_w)
        recommend_day(con, DAY, settings_)
        cur = con.execute("SELECT * FROM fct_recommendation ORDER BY gpu_uuid")
        names = [d[0] for d in cur.description]
        rows = {r["gpu_uuid"]: r for r in (dict(zip(names, v)) for v in cur.fetchall())}
        intervals, _ = power_interval_day(con, DAY, settings_)
        days[stray_w] = rows, sorted((i.bottleneck, i.workload_class, i.default_limit_w, i.best_limit_w)
                                     for i in intervals)
    (clean, clean_intervals), (stray, stray_intervals) = days[None], days[4000.0]
    assert clean_intervals and stray_intervals == clean_intervals
    kept = ("default_limit_w", "power_limit_w", "locked_sm_clock_max_mhz", "expected_saving_pct",
            "expected_energy_saving_kwh_per_day", "expected_slowdown_pct")
    for uuid, row in clean.items():
        # the two days' fits differ in their last bits (the rows are summed in another order)
        rounded = lambda r: {k: None if r[k] is None else round(r[k], 9) for k in kept}  # noqa: E731
        assert rounded(stray[uuid]) == rounded(row), uuid
    assert "set aside" not in clean[_uuid(1)]["reason"]
    assert "1 of its 2160 readings showed a limit above 400 W (up to 4000 W)" in stray[_uuid(1)]["reason"]
    assert "set aside" in stray[_uuid(1)]["reason"]
