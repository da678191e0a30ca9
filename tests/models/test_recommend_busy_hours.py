"""A GPU's busy hours, on which its kWh saving rests, count the hours its readings cover, not the
span from its first reading to its last across a silence."""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.models.power import fit_day
from joulehouse.models.recommend import recommend_day
from joulehouse.models.recommend_inputs import gpu_day_profiles
from joulehouse.settings import ModelSettings, RecommendSettings
from power_synthetic import load_samples, synthetic_samples

DAY = dt.date(2026, 3, 2)
INTERVAL_S = 10.0


def test_a_gpu_silent_most_of_the_day_is_not_busy_through_the_silence():
    """GPU 1 read 00:00-01:00 and 23:00-24:00 only (its collector down in between): 720 readings,
    2 h. By the span from its first reading to its last it was busy 15.5 h and promised ~0.195
    kWh/day, as much as the GPUs read all day; the warehouse's coverage (hand-made here: the two
    hours) bounds it."""
    con = duckdb.connect()
    load_samples(con, synthetic_samples(seed=21, n_gpus=3, capped_limit_w=None, hours=24, interval_s=INTERVAL_S))
    fit_day(con, DAY, ModelSettings())
    silent = "GPU-node-01-1-21"
    con.execute("DELETE FROM stg_gpu_samples WHERE gpu_uuid = ? AND sampled_at >= ? AND sampled_at < ?",
                [silent, dt.datetime(2026, 3, 2, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 3, 2, 23, tzinfo=dt.timezone.utc)])
    read_s = {u: n * INTERVAL_S for u, n in con.execute("SELECT gpu_uuid, count(*) FROM stg_gpu_samples GROUP BY 1").fetchall()}
    assert read_s[silent] == 2 * 3600
    con.execute("CREATE TABLE fct_gpu_coverage_daily (day DATE, gpu_uuid VARCHAR, covered_s DOUBLE)")
    con.executemany("INSERT INTO fct_gpu_coverage_daily VALUES (?, ?, ?)", [[DAY, u, s] for u, s in read_s.items()])
    profiles = {p["gpu_uuid"]: p for p in gpu_day_profiles(con, DAY)}
    for uuid, p in profiles.items():
        # the span of a GPU read all day is 24 h less one interval: the coverage does not cut it short
        assert p["busy_hours"] == min(read_s[uuid], 86400 - INTERVAL_S) / 3600 * p["busy_ratio"], uuid
    assert profiles[silent]["busy_hours"] < 2.0
    recommend_day(con, DAY, RecommendSettings(holdout_share=0.0))
    row = con.execute("SELECT reason, expected_energy_saving_kwh_per_day FROM fct_recommendation WHERE gpu_uuid = ?",
                      [silent]).fetchone()
    assert f"busy {profiles[silent]['busy_hours']:.1f} h" in row[0]
    # a saving of at most the 400 W default's energy over the hours it was read busy
    assert 0 < row[1] <= profiles[silent]["busy_hours"] * 400 / 1000


def test_without_the_warehouses_coverage_the_span_of_the_readings_stands():
    con = duckdb.connect()
    load_samples(con, synthetic_samples(seed=21, n_gpus=1, capped_limit_w=None, hours=6, interval_s=INTERVAL_S))
    fit_day(con, DAY, ModelSettings())
    (p,) = gpu_day_profiles(con, DAY)
    assert abs(p["busy_hours"] - p["busy_ratio"] * (6 - INTERVAL_S / 3600)) < 1e-9
