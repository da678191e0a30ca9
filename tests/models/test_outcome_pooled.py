"""A pooled (model, setting) outcome row sets its realised saving beside its predicted one, and the
daily report's summary reads exactly that pair ("X% less ... where Y% was predicted"): both must be
about the same GPUs. Two GPUs take the same 400 -> 300 W cap on day 2; only GPU-T can be estimated,
GPU-U cannot (no job shared with a control, or no work after the change)."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

import test_outcome_guards
from joulehouse.models.sql import load_sql
from test_outcome_guards import D0, _audit, _job, _measured

BEFORE_W, AFTER_W = 350.0, 300.0
TREATED = ("GPU-T", "GPU-U")
# T does 0.9 of the FLOPs at 300 W after the cap: 1 - (300 / 0.9) / 350 = 4.76% less energy per FLOP, as predicted
T_SAVING_PCT, T_SLOWDOWN_PCT = 100 * (1 - AFTER_W / 0.9 / BEFORE_W), 100 * (1 / 0.9 - 1)
U_SAVING_PCT, U_SLOWDOWN_PCT = 20.0, 2.0


@pytest.fixture(autouse=True)
def two_treated_gpus(monkeypatch):
    monkeypatch.setattr(test_outcome_guards, "GPUS", ["GPU-T", "GPU-U", "GPU-C1", "GPU-C2"])


def _profile(gpu, day, minute):
    return (AFTER_W, 90.0, 300.0) if gpu in TREATED and day >= 2 else (BEFORE_W, 90.0, 400.0)


def _recommended(tmp_path, predictions: dict[str, tuple[float, float]]) -> None:
    """Day-1 recommendations of 300 W (default 400 W): {gpu: (saving %, slowdown %)}."""
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute(load_sql("fct_recommendation"))
    for gpu, (saving_pct, slowdown_pct) in predictions.items():
        con.execute("INSERT INTO fct_recommendation (day, host, gpu_uuid, gpu_model, power_limit_w, default_limit_w, "
                    "expected_saving_pct, expected_slowdown_pct) VALUES (?, 'node-01', ?, 'NVIDIA A100-SXM4-80GB', "
                    "300, 400, ?, ?)", [D0 + dt.timedelta(days=1), gpu, saving_pct, slowdown_pct])
    con.close()


def _flops(gpu, day):
    return 0.9e18 if gpu == "GPU-T" and day >= 2 else 1e18


def _matched_jobs():
    """T shares a job with C1 every day; U and C2 run alone: U has no control to be matched with."""
    return ([_job(f"pair-{d}", g, d, flops_total=_flops(g, d)) for d in range(4) for g in ("GPU-T", "GPU-C1")]
            + [_job(f"solo-{g}-{d}", g, d, flops_total=1e18) for d in range(4) for g in ("GPU-U", "GPU-C2")])


def _gpu_day_jobs():
    """Every GPU runs alone; U's work stops at the change (no work after it to measure)."""
    return [_job(f"solo-{g}-{d}", g, d, flops_total=_flops(g, d)) for d in range(4)
            for g in ("GPU-T", "GPU-U", "GPU-C1", "GPU-C2") if not (g == "GPU-U" and d >= 2)]


def _by_gpu(rows):
    return {r["gpu_uuid"] or "pooled": r for r in rows}


@pytest.mark.parametrize("jobs, method", [(_matched_jobs, "matched_jobs"), (_gpu_day_jobs, "gpu_day")])
def test_the_pooled_prediction_is_of_the_gpus_the_pooled_saving_measured(tmp_path, jobs, method):
    """The pooled row read 4.76% realised (T alone) "where 12.4% was predicted": the mean of T's
    4.76% and U's 20%, a GPU nothing was measured on. The prediction is T's now, as the saving is."""
    _recommended(tmp_path, {"GPU-T": (T_SAVING_PCT, T_SLOWDOWN_PCT), "GPU-U": (U_SAVING_PCT, U_SLOWDOWN_PCT)})
    rows = _by_gpu(_measured(tmp_path, _profile, jobs(), [_audit(2, "apply", 400.0, 300.0, gpu=g) for g in TREATED]))
    t, u, pooled = rows["GPU-T"], rows["GPU-U"], rows["pooled"]
    assert {r["method"] for r in rows.values()} == {method}
    assert u["realised_saving_pct"] is None and u["predicted_saving_pct"] == pytest.approx(U_SAVING_PCT)
    assert t["realised_saving_pct"] == pytest.approx(T_SAVING_PCT, abs=1e-3)
    assert pooled["n_treated_gpus"] == 1
    assert pooled["realised_saving_pct"] == pytest.approx(T_SAVING_PCT, abs=1e-3)
    assert pooled["predicted_saving_pct"] == pytest.approx(T_SAVING_PCT, abs=1e-9)
    assert pooled["predicted_slowdown_pct"] == pytest.approx(T_SLOWDOWN_PCT, abs=1e-9)
    assert "1 of the 2 GPUs" in pooled["note"]


def test_a_pooled_prediction_missing_for_a_measured_gpu_is_no_prediction(tmp_path):
    """U's cap was set by hand (no recommendation) and measured: 0.8 of the work at 300 W, 7.1%
    more energy per FLOP. The pooled row read the mean saving of T and U "where 4.76% was
    predicted", T's prediction alone. Without one for U there is no pooled prediction, and the
    note says why."""
    _recommended(tmp_path, {"GPU-T": (T_SAVING_PCT, T_SLOWDOWN_PCT)})

    def flops(gpu, day):
        return 0.8e18 if gpu == "GPU-U" and day >= 2 else _flops(gpu, day)

    jobs = [_job(f"solo-{g}-{d}", g, d, flops_total=flops(g, d)) for d in range(4) for g in test_outcome_guards.GPUS]
    rows = _by_gpu(_measured(tmp_path, _profile, jobs, [_audit(2, "apply", 400.0, 300.0, gpu=g) for g in TREATED]))
    pooled = rows["pooled"]
    assert rows["GPU-U"]["realised_saving_pct"] == pytest.approx(100 * (1 - AFTER_W / 0.8 / BEFORE_W), abs=1e-3)
    assert rows["GPU-U"]["predicted_saving_pct"] is None
    assert pooled["n_treated_gpus"] == 2 and pooled["realised_saving_pct"] is not None
    assert pooled["predicted_saving_pct"] is None and pooled["predicted_slowdown_pct"] is None
    assert "no recommendation predicted 1 of them" in pooled["note"]


def test_the_pooled_slowdown_is_of_the_gpus_the_pooled_saving_measured(tmp_path):
    """T shares a job with C1 every day and, capped, does exactly C1's work (in step: no pace of its
    own after the change). U runs alone before the change and with C2 after, at 0.8 of C2's work:
    not estimated (no job shared with a control before). The pooled row's slowdown read 25%, U's
    pace after set against T's before, while T's own row said its slowdown is unknown."""
    def flops(gpu, day):
        return {"GPU-T": 0.9e18, "GPU-C1": 0.9e18, "GPU-U": 0.8e18}.get(gpu, 1e18) if day >= 2 else 1e18

    jobs = ([_job(f"pair-{d}", g, d, flops_total=flops(g, d)) for d in range(4) for g in ("GPU-T", "GPU-C1")]
            + [_job(f"solo-{g}-{d}", g, d, flops_total=flops(g, d)) for d in range(2) for g in ("GPU-U", "GPU-C2")]
            + [_job(f"pair-u-{d}", g, d, flops_total=flops(g, d)) for d in range(2, 4) for g in ("GPU-U", "GPU-C2")])
    rows = _by_gpu(_measured(tmp_path, _profile, jobs, [_audit(2, "apply", 400.0, 300.0, gpu=g) for g in TREATED]))
    t, u, pooled = rows["GPU-T"], rows["GPU-U"], rows["pooled"]
    assert {r["method"] for r in rows.values()} == {"matched_jobs"}
    assert u["realised_saving_pct"] is None and pooled["n_treated_gpus"] == 1
    assert t["realised_slowdown_pct"] is None and "ran their GPUs in step" in t["note"]
    assert pooled["realised_saving_pct"] == pytest.approx(t["realised_saving_pct"], abs=1e-9)
    assert pooled["realised_slowdown_pct"] is None and "ran their GPUs in step" in pooled["note"]
