"""The power fit reads activity and memory activity by the rule every model that scores with it reads
them by (models/sql/activity_of_kind.sql): a change to that rule reaches the fit's features and the
sums stored per day, not only the recommender and the power interval, so a fit can never be trained
in one measure and scored in another."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.models.power import build_power_features, update_suffstats
from joulehouse.models.sql import SQL
from joulehouse.settings import ModelSettings
from power_synthetic import load_samples, synthetic_samples

A100 = "NVIDIA A100-SXM4-80GB"
H100 = "NVIDIA H100 80GB HBM3"
FIRST = dt.date(2026, 3, 1)
SETTINGS = ModelSettings(history_days=2)


def _warehouse() -> duckdb.DuckDBPyConnection:
    """Two days of an A100 read by DCGM (feature set 'dcgm') and an H100 read by NVML alone ('nvml')."""
    con = duckdb.connect()
    for i in range(2):
        start = dt.datetime.combine(FIRST + dt.timedelta(days=i), dt.time(), dt.timezone.utc)
        load_samples(con, synthetic_samples(n_gpus=1, hours=6, interval_s=60.0, seed=i, start=start))
        load_samples(con, synthetic_samples(gpu_model=H100, dcgm=False, n_gpus=1, hours=6, interval_s=60.0,
                                            seed=10 + i, start=start, host="node-02"))
    return con


def _use_a_later_rule(monkeypatch) -> None:
    """activity_of_kind.sql as a later release might write it: NVML's percentages read at half."""
    text = SQL.text("activity_of_kind")
    assert text.count("nvml_pct / 100.0") == 1
    monkeypatch.setitem(SQL._texts, "activity_of_kind", text.replace("nvml_pct / 100.0", "nvml_pct / 200.0"))


def test_the_fits_features_follow_the_activity_rule(monkeypatch):
    _use_a_later_rule(monkeypatch)
    con = _warehouse()
    last = FIRST + dt.timedelta(days=1)
    build_power_features(con, last, SETTINGS)
    rows = con.execute("SELECT gpu_model, any_value(feature_set), count(*), "
                       "count(*) FILTER (WHERE activity_ratio IS NOT DISTINCT FROM activity_expected "
                       "                   AND memory_ratio IS NOT DISTINCT FROM memory_expected) "
                       "FROM (SELECT r.*, "
                       "             CASE WHEN r.feature_set = 'dcgm' THEN CAST(s.sm_active_ratio AS DOUBLE) "
                       "                  ELSE s.util_gpu_pct / 200.0 END AS activity_expected, "
                       "             CASE WHEN r.feature_set = 'dcgm' THEN CAST(s.dram_active_ratio AS DOUBLE) "
                       "                  ELSE s.util_mem_pct / 200.0 END AS memory_expected "
                       "      FROM power_feature_rows AS r JOIN stg_gpu_samples AS s USING (gpu_uuid, sampled_at)) "
                       "GROUP BY gpu_model ORDER BY gpu_model").fetchall()
    # every row of both models, each in its feature set's measure as the rule reads it now
    assert [(m, s) for m, s, _, _ in rows] == [(A100, "dcgm"), (H100, "nvml")]
    assert all(n > 0 and matched == n for _, _, n, matched in rows)


def test_a_change_to_the_activity_rule_sums_the_stored_days_again(monkeypatch):
    con = _warehouse()
    last = FIRST + dt.timedelta(days=1)
    assert update_suffstats(con, last, SETTINGS) == [FIRST, last]
    assert update_suffstats(con, last, SETTINGS) == [last], "summed once, then kept"
    (before,) = con.execute("SELECT sum(sa) FROM fct_power_fit_sums_hourly WHERE day = ? AND gpu_model = ?",
                            [FIRST, H100]).fetchone()

    _use_a_later_rule(monkeypatch)
    # the stored day's NVML activity was read under the old rule: kept, the window would train on
    # two measures at once
    assert update_suffstats(con, last, SETTINGS) == [FIRST, last]
    (after,) = con.execute("SELECT sum(sa) FROM fct_power_fit_sums_hourly WHERE day = ? AND gpu_model = ?",
                           [FIRST, H100]).fetchone()
    assert after == pytest.approx(before / 2, rel=1e-9)
