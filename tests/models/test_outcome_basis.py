"""The predicted and the realised saving of an outcome row are on one basis: the GPU's own energy
(neither counts the server's overhead), per the unit the row measures. Per unit of work the
recommendation's energy-to-solution saving is compared as it is; per active hour (no job reports
work) the measurement is the GPU's mean busy power, so the prediction is the power saving it
implies: energy per work = power x run time, power after/before = (1 - saving) / (1 + slowdown)."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from joulehouse.models.sql import load_sql
from test_outcome_guards import D0, GPUS, _audit, _job, _measured, _t_row
from test_recommend import _one_gpu

# GPU-T capped 400 -> 300 W from day 2: its mean busy power goes 350 -> 300 W; the controls stay at 350 W.
BEFORE_W, AFTER_W = 350.0, 300.0


def _profile(gpu, day, minute):
    return (AFTER_W, 90.0, 300.0) if gpu == "GPU-T" and day >= 2 else (BEFORE_W, 90.0, 400.0)


def _recommended(tmp_path, saving_pct: float, slowdown_pct: float) -> None:
    """The day-1 recommendation of 300 W (default 400 W) for GPU-T, in the warehouse the outcome reads."""
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute(load_sql("fct_recommendation"))
    con.execute("INSERT INTO fct_recommendation (day, host, gpu_uuid, gpu_model, power_limit_w, default_limit_w, "
                "expected_saving_pct, expected_slowdown_pct) VALUES (?, 'node-01', 'GPU-T', 'NVIDIA A100-SXM4-80GB', "
                "300, 400, ?, ?)", [D0 + dt.timedelta(days=1), saving_pct, slowdown_pct])
    con.close()


def test_per_active_hour_the_prediction_is_the_power_saving_it_implies(tmp_path):
    """No job reports work: measured per active hour, 1 - 300/350 = 14.29%. The recommendation
    said 300 W at 10% slower, 1 - (300/350) x 1.10 = 5.71% less energy per unit of work: exactly
    what happened, yet set beside 14.29% it read as 8.6 points under-predicted. Its power saving,
    1 - (1 - 0.0571) / 1.10 = 14.29%, is the figure on the measured basis."""
    energy_per_work_saving_pct = 100 * (1 - AFTER_W / BEFORE_W * 1.10)
    _recommended(tmp_path, energy_per_work_saving_pct, 10.0)
    jobs = [_job(f"j-{g}-{d}", g, d) for d in range(4) for g in GPUS]
    rows = _measured(tmp_path, _profile, jobs, [_audit(2, "apply", 400.0, 300.0)])
    power_saving_pct = 100 * (1 - AFTER_W / BEFORE_W)
    assert {r["outcome_unit"] for r in rows} == {"active_hour"} and len(rows) == 2  # GPU-T and its pooled row
    for r in rows:
        assert r["realised_saving_pct"] == pytest.approx(power_saving_pct, abs=1e-3)
        assert r["predicted_saving_pct"] == pytest.approx(power_saving_pct, abs=1e-9)
        assert r["predicted_slowdown_pct"] == pytest.approx(10.0)


def test_per_unit_of_work_the_predicted_energy_to_solution_saving_is_compared_as_it_is(tmp_path):
    """GPU-T does 0.9 of the FLOPs at 300 W after the cap: 1 - (300/0.9)/350 = 4.76% less energy
    per FLOP, 11.1% slower, as predicted; both columns hold 4.76%."""
    saving_pct, slowdown_pct = 100 * (1 - AFTER_W / 0.9 / BEFORE_W), 100 * (1 / 0.9 - 1)
    _recommended(tmp_path, saving_pct, slowdown_pct)
    jobs = [_job(f"j-{g}-{d}", g, d, flops_total=0.9e18 if g == "GPU-T" and d >= 2 else 1e18)
            for d in range(4) for g in GPUS]
    t = _t_row(_measured(tmp_path, _profile, jobs, [_audit(2, "apply", 400.0, 300.0)]))
    assert t["outcome_unit"] == "flop"
    assert t["realised_saving_pct"] == pytest.approx(saving_pct, abs=1e-3)
    assert t["predicted_saving_pct"] == pytest.approx(saving_pct, abs=1e-9)


def test_the_recommendations_saving_counts_the_gpus_energy_only_as_the_outcome_measures_it():
    """The server's overhead per GPU moves which setting is cheapest, not the basis of the saving
    stored: 300 W of it over a 7.6% longer run would make the 300 W cap's 9.59% at the GPU 1.7% at
    the wall, and the outcome (GPU energy per unit of work) could not be set against that."""
    without, with_overhead = (_one_gpu("throughput", price=0.10, demand=0.0, overhead_w=w) for w in (0.0, 300.0))
    assert without["power_limit_w"] == with_overhead["power_limit_w"] == 300.0
    assert with_overhead["expected_saving_pct"] == pytest.approx(without["expected_saving_pct"], abs=1e-12)
    assert with_overhead["expected_saving_pct"] > 9.0


def test_a_gpu_whose_new_limit_never_bound_is_predicted_on_its_settings_basis(tmp_path):
    """GPU-C3 took the same 300 W cap but never drew over 250 W: no estimate, its row still shows
    what was predicted. In a setting measured per active hour, it stood as an energy-per-work
    saving (5.71%) with no unit beside GPU-T's power savings (14.29%)."""
    energy_per_work_saving_pct = 100 * (1 - AFTER_W / BEFORE_W * 1.10)
    _recommended(tmp_path, energy_per_work_saving_pct, 10.0)
    con = duckdb.connect(str(tmp_path / "w.duckdb"))
    con.execute("INSERT INTO fct_recommendation (day, host, gpu_uuid, gpu_model, power_limit_w, default_limit_w, "
                "expected_saving_pct, expected_slowdown_pct) VALUES (?, 'node-01', 'GPU-C3', 'NVIDIA A100-SXM4-80GB', "
                "300, 400, ?, 10.0)", [D0 + dt.timedelta(days=1), energy_per_work_saving_pct])
    con.close()

    def profile(gpu, day, minute):
        if gpu == "GPU-C3":
            return (200.0, 60.0, 300.0 if day >= 2 else 400.0)
        return _profile(gpu, day, minute)

    jobs = [_job(f"j-{g}-{d}", g, d) for d in range(4) for g in GPUS]
    rows = _measured(tmp_path, profile, jobs, [_audit(2, "apply", 400.0, 300.0),
                                               _audit(2, "apply", 400.0, 300.0, gpu="GPU-C3")])
    [c3] = [r for r in rows if r["gpu_uuid"] == "GPU-C3"]
    assert c3["realised_saving_pct"] is None and c3["note"].startswith("the new limit never bound")
    assert c3["outcome_unit"] == "active_hour"
    assert c3["predicted_saving_pct"] == pytest.approx(100 * (1 - AFTER_W / BEFORE_W), abs=1e-9)
