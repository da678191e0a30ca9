"""Which features a GPU model's power fit uses is one rule (models/sql/fit_feature_choice.sql) for the
window's choice from its samples (the reference path Spark runs), the window's choice from the stored
daily sums (what fit_day uses) and each day's choice stored with its sums. A day's sums stand in for
its samples only where the day chose as its window did, so a rule changed in one place and not the
others would re-read every day, or train the window on sums chosen under another rule; and the
Python readers of a stored fit pair each feature set with the activity measure the fit read."""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from joulehouse.models.power import build_power_features, fit_day, update_suffstats
from joulehouse.models.recommend_inputs import ACTIVITY_KIND_OF_FEATURE_SET
from joulehouse.models.sql import SQL
from joulehouse.settings import ModelSettings
from power_synthetic import load_samples, synthetic_samples

A100 = "NVIDIA A100-SXM4-80GB"
FIRST = dt.date(2026, 3, 1)
LAST = FIRST + dt.timedelta(days=1)
SETTINGS = ModelSettings(history_days=2)
SM_ACTIVE_SHARE = 0.65  # DCGM's SM activity on 65% of the rows: 'dcgm' at the rule's half, not at 80%


def _warehouse() -> duckdb.DuckDBPyConnection:
    """Two days of an A100 read by DCGM whose SM activity is missing from 35% of the rows."""
    con = duckdb.connect()
    for i in range(2):
        start = dt.datetime.combine(FIRST + dt.timedelta(days=i), dt.time(), dt.timezone.utc)
        table = synthetic_samples(n_gpus=1, hours=6, interval_s=60.0, seed=i, start=start)
        column = table.column_names.index("sm_active_ratio")
        missing = pa.array(np.arange(table.num_rows) % 100 >= SM_ACTIVE_SHARE * 100)
        table = table.set_column(column, "sm_active_ratio", pc.if_else(
            missing, pa.nulls(table.num_rows, table.schema.field(column).type), table.column(column)))
        load_samples(con, table)
    return con


def _use_a_later_rule(monkeypatch) -> None:
    """fit_feature_choice.sql as a later release might write it: SM activity on 80% of the rows for 'dcgm'."""
    text = SQL.text("fit_feature_choice")
    assert text.count("n_sm_active / n_rows >= 0.5") == 4
    monkeypatch.setitem(SQL._texts, "fit_feature_choice",
                        text.replace("n_sm_active / n_rows >= 0.5", "n_sm_active / n_rows >= 0.8"))


def _stored_feature_sets(con) -> list[tuple]:
    return con.execute("SELECT day, any_value(feature_set), count(DISTINCT feature_set) "
                       "FROM fct_power_fit_sums_hourly GROUP BY day ORDER BY day").fetchall()


def test_a_change_to_the_feature_choice_reaches_the_window_the_stored_days_and_the_reference(monkeypatch):
    con = _warehouse()
    assert update_suffstats(con, LAST, SETTINGS) == [FIRST, LAST]
    assert _stored_feature_sets(con) == [(FIRST, "dcgm", 1), (LAST, "dcgm", 1)]

    _use_a_later_rule(monkeypatch)
    # the stored days were chosen under the old rule: summed again, not kept
    assert update_suffstats(con, LAST, SETTINGS) == [FIRST, LAST]
    assert _stored_feature_sets(con) == [(FIRST, "nvml", 1), (LAST, "nvml", 1)]

    (fit,) = fit_day(con, LAST, SETTINGS)
    assert fit.feature_set == "nvml"
    window = con.execute("SELECT feature_set, activity_kind, stored_until_epoch_s, "
                         "       floor(holdout_from_epoch_s / 3600) * 3600 FROM power_feature_choice").fetchall()
    # every stored day chose as the window did: all training hours before the held-out hour come from
    # the sums (a day that chose otherwise would be re-read from its first hour)
    assert [(s, k) for s, k, _, _ in window] == [("nvml", "util_gpu")]
    assert window[0][2] == window[0][3] > dt.datetime.combine(FIRST, dt.time(), dt.timezone.utc).timestamp()

    build_power_features(con, LAST, SETTINGS)  # from the samples alone: the path Spark runs
    assert con.execute("SELECT feature_set, activity_kind FROM power_feature_choice").fetchall() == [("nvml", "util_gpu")]


def test_python_readers_of_a_fit_pair_each_feature_set_with_the_measure_the_fit_read():
    con = duckdb.connect()
    SQL.execute(con, "fit_feature_choice")
    # 10 rows, all with NVML's readings and a varying clock; SM activity on 5 of them (half: DCGM's), then on 4
    chosen = con.execute(
        "SELECT n_sm_active, c.feature_set, c.activity_kind, c.has_activity, c.clock_varies "
        "FROM (SELECT n_sm_active, fit_feature_choice(10, n_sm_active, n_sm_active, 10, 10, 10, 10, 0, 1000, 1410) AS c "
        "      FROM (VALUES (5), (4)) AS t(n_sm_active)) ORDER BY n_sm_active DESC").fetchall()
    assert chosen == [(5, "dcgm", "sm_active", True, True), (4, "nvml", "util_gpu", True, True)]
    assert {feature_set: kind for _, feature_set, kind, _, _ in chosen} == ACTIVITY_KIND_OF_FEATURE_SET
