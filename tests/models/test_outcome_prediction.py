"""What an outcome row calls predicted: fct_recommendation's figures are against the default limit,
the realised saving against the limit before the change, so a change that starts from a cap (a
revert to the default, one cap for another) is rebased on what was predicted at that cap."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.models.limit_change import Change
from joulehouse.models.outcome_matched import predicted_saving
from joulehouse.models.sql import load_sql

D1, D2, EFFECTIVE = dt.date(2026, 6, 11), dt.date(2026, 6, 12), dt.date(2026, 6, 13)


@pytest.fixture()
def con():
    c = duckdb.connect()
    c.execute(load_sql("fct_recommendation"))
    yield c
    c.close()


def _recommend(con, day, limit_w, saving_pct, slowdown_pct, default_w=700.0):
    con.execute("INSERT INTO fct_recommendation (day, host, gpu_uuid, gpu_model, power_limit_w, default_limit_w, "
                "expected_saving_pct, expected_slowdown_pct) VALUES (?, 'h', 'GPU-1', 'H100', ?, ?, ?, ?)",
                [day, limit_w, default_w, saving_pct, slowdown_pct])


def _change(before_w, after_w):
    return Change("GPU-1", "h", "H100", EFFECTIVE, before_w, after_w, (D1, D2), (EFFECTIVE,))


def test_a_cap_from_the_default_keeps_the_recommendations_own_figures(con):
    _recommend(con, D1, 450.0, 11.6, 3.0)
    assert predicted_saving(con, _change(700.0, 450.0)) == (11.6, 3.0)


def test_a_revert_to_the_default_is_predicted_to_cost_what_the_cap_saved(con):
    """The operator's trial: 450 -> 700 W with no agent audit was shown as "predicted 0.0%"
    beside a realised -17.4%. Against the cap, the default costs 1/(1 - 0.116) - 1 = 13.1% more."""
    _recommend(con, D1, 450.0, 11.6, 3.0)
    saving, slowdown = predicted_saving(con, _change(450.0, 700.0))
    assert saving == pytest.approx(100 * (1 - 1 / (1 - 0.116)))
    assert saving == pytest.approx(-13.12, abs=0.01)
    assert slowdown == pytest.approx(100 * (1 / 1.03 - 1))  # faster again
    _recommend(con, D2, 700.0, 0.0, 0.0)  # a "keep the default" row changes nothing
    assert predicted_saving(con, _change(450.0, 700.0))[0] == pytest.approx(saving)


def test_one_cap_for_another_is_the_ratio_of_their_predictions(con):
    _recommend(con, D1, 450.0, 10.0, 2.0)
    _recommend(con, D2, 400.0, 19.0, 6.0)
    saving, slowdown = predicted_saving(con, _change(450.0, 400.0))
    assert saving == pytest.approx(100 * (1 - 0.81 / 0.90))  # 10%: from 0.90 to 0.81 of the default's energy
    assert slowdown == pytest.approx(100 * (1.06 / 1.02 - 1))


def test_no_prediction_for_a_limit_nothing_recommended(con):
    _recommend(con, D1, 450.0, 11.6, 3.0)
    assert predicted_saving(con, _change(700.0, 425.0)) == (None, None)  # 425 W never recommended
    assert predicted_saving(con, _change(500.0, 450.0)) == (None, None)  # from a hand-set 500 W: no baseline


def test_a_cap_the_agent_applied_and_that_went_without_an_audit_is_called_lost():
    """The operator's trial: caps applied by the agent on 06-12, then GPUs back at 700 W with no
    audit (a reboot, a driver reload). The row measures the revert, and now says what it is."""
    from joulehouse.models.outcome import _reverted_note

    row = {"scope": "gpu", "evidence": "samples", "gpu_uuid": "GPU-1", "power_limit_w_before": 450.0,
           "power_limit_w_after": 700.0}
    applied = {("GPU-1", 450.0)}
    note = _reverted_note(row, applied, applied)
    assert note and note.startswith("the 450 W the agent applied was undone outside it")
    assert _reverted_note(row, set(), set()) is None  # never applied by the agent: a change like any other
    assert _reverted_note(row, applied, applied | {("GPU-1", 700.0)}) is None  # the agent's own rollback
    assert _reverted_note(row | {"scope": "model_setting", "gpu_uuid": None}, applied, applied) is None


def test_a_rollback_that_left_the_clocks_locked_is_still_the_agents_own():
    """A rollback whose limit went back to 700 W but whose clock unlock failed is audited
    'verify-failed' (700 W after): the revert was the agent's, not a setting lost outside it."""
    from joulehouse.models.outcome import _reverted_note, _set_by_agent

    con = duckdb.connect()
    con.execute("CREATE TABLE raw_agent_audit AS SELECT * FROM (VALUES "
                "('GPU-1', 'apply', 450.0, DATE '2026-06-12'), ('GPU-1', 'verify-failed', 700.0, DATE '2026-06-13'), "
                "('GPU-2', 'apply', 450.0, DATE '2026-06-12'), ('GPU-2', 'refuse', 450.0, DATE '2026-06-13')) "
                "AS t(gpu_uuid, action, power_limit_w_after, date)")
    by_agent = _set_by_agent(con, D1, EFFECTIVE)
    applied = {("GPU-1", 450.0), ("GPU-2", 450.0)}
    row = {"scope": "gpu", "evidence": "samples", "power_limit_w_before": 450.0, "power_limit_w_after": 700.0}
    assert _reverted_note(row | {"gpu_uuid": "GPU-1"}, applied, by_agent) is None
    assert _reverted_note(row | {"gpu_uuid": "GPU-2"}, applied, by_agent).startswith("the 450 W the agent applied")
