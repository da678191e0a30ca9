"""Predicted vs real saving on the simulator: recommend_day on a simulated day, then the same day
simulated again (same seed, so the same jobs) with the recommended limits and clock locks applied.
The truth is each GPU's energy per FLOP over its jobs, capped vs not."""

from __future__ import annotations

import datetime as dt
from collections import defaultdict

import numpy as np
import pytest

from joulehouse.settings import ModelSettings, RecommendSettings, WarehouseSettings
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.models.power import fit_day
from joulehouse.models.recommend import recommend_day
from outcome_world import true_job_energy
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 1, 2)
SEED = 3
# Stated tolerances (percentage points of energy per unit of work): each GPU model's mean
# predicted saving over its throughput GPUs given a setting, and each such GPU alone. Measured with
# the simulator's dynamic power at the sweeps' f^4.4-4.85 (it was f^3, and 3.5 points per GPU):
# pooled -1.5 (A100), -1.5 (H100), -0.5 (H200); per GPU -4.8..+0.4, the prediction on the low side.
POOLED_TOLERANCE_PCT = 2.0
GPU_TOLERANCE_PCT = 5.0


@pytest.fixture(scope="module")
def predicted_and_true(tmp_path_factory):
    root = tmp_path_factory.mktemp("calibration")
    summary = simulate_fleet(root / "base" / "lake", gpus=32, days=1, start=DAY, seed=SEED, interval_s=60)
    con = connect(root / "w.duckdb", root / "base" / "lake")
    build_day(con, DAY, WarehouseSettings(inventory_path=str(summary.inventory_path)),
              now=dt.datetime(2027, 1, 1, tzinfo=dt.timezone.utc))
    fit_day(con, DAY, ModelSettings())
    recommend_day(con, DAY, RecommendSettings(holdout_share=0.0))
    cur = con.execute("SELECT gpu_uuid, gpu_model, workload_class, power_limit_w, default_limit_w, locked_sm_clock_min_mhz, "
                      "locked_sm_clock_max_mhz, expected_saving_pct FROM fct_recommendation")
    recs = [dict(zip([d[0] for d in cur.description], r)) for r in cur.fetchall()]
    con.close()
    caps = {r["gpu_uuid"]: r["power_limit_w"] for r in recs if r["power_limit_w"] is not None
            and r["power_limit_w"] < r["default_limit_w"]}
    locks = {r["gpu_uuid"]: (int(r["locked_sm_clock_min_mhz"]), int(r["locked_sm_clock_max_mhz"]))
             for r in recs if r["locked_sm_clock_max_mhz"] is not None}
    simulate_fleet(root / "applied" / "lake", gpus=32, days=1, start=DAY, seed=SEED, interval_s=60,
                   power_limits_by_day={DAY: caps}, locked_sm_clocks_by_day={DAY: locks})
    base, applied = true_job_energy(root / "base" / "lake"), true_job_energy(root / "applied" / "lake")
    sums = defaultdict(lambda: np.zeros(4))  # energy and FLOPs, default then applied
    for key, (e, flops, _) in base.items():
        if flops and key in applied and applied[key][1]:
            sums[key[1]] += [e, flops, applied[key][0], applied[key][1]]
    out = []
    for r in recs:
        if r["gpu_uuid"] in caps or r["gpu_uuid"] in locks:
            e, f, e_applied, f_applied = sums[r["gpu_uuid"]]
            out.append(r | {"true_saving_pct": 100 * (1 - (e_applied / f_applied) / (e / f))})
    return out


@pytest.mark.slow
def test_predicted_saving_matches_what_the_simulator_saves(predicted_and_true):
    throughput = [r for r in predicted_and_true if r["workload_class"] == "throughput"]
    models = {r["gpu_model"] for r in throughput}
    assert len(models) == 3 and len(throughput) >= 15
    for model in models:
        mine = [r for r in throughput if r["gpu_model"] == model]
        predicted = np.mean([r["expected_saving_pct"] for r in mine])
        true = np.mean([r["true_saving_pct"] for r in mine])
        assert abs(predicted - true) <= POOLED_TOLERANCE_PCT, (model, predicted, true)
    for r in throughput:
        assert abs(r["expected_saving_pct"] - r["true_saving_pct"]) <= GPU_TOLERANCE_PCT, r


@pytest.mark.slow
def test_jobs_with_application_clock_locks_are_not_counted_as_savings(predicted_and_true):
    """A cap does nothing to a job whose clocks an application already locked below it: the
    prediction must not claim it (before, such GPUs were predicted +4 to +8 points too high)."""
    assert all(r["expected_saving_pct"] - r["true_saving_pct"] <= 1.5 for r in predicted_and_true
               if r["workload_class"] == "throughput"), [
        (r["gpu_model"], r["expected_saving_pct"], r["true_saving_pct"]) for r in predicted_and_true]
