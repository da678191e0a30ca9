"""The best power interval's rule (models.power_interval.interval_on_curve) on measured Zeus sweeps:
the cap model fitted to each sweep (models.cap_calibration), its curve through the same choice the
warehouse makes, against the measured energy optimum under the same slowdown bound
(models.sweeps.choose_setting). Zeus sweeps step the limit by 25 W: "within one step" is 25 W."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from joulehouse.models.cap_calibration import fit_cap_shape, predicted_curve
from joulehouse.models.power_interval import interval_on_curve
from joulehouse.models.settings import RecommendSettings
from joulehouse.models.sweeps import Sweep, choose_setting, load_sweep, load_sweeps

SWEEPS = Path(__file__).resolve().parents[3] / "shared" / "data" / "sweeps"
STEP_W = 25.0
BOUNDS = {"throughput": RecommendSettings().max_slowdown_throughput_pct,
          "background": RecommendSettings().max_slowdown_background_pct}


def _model_interval(sweep: Sweep, bound_pct: float):
    shape = fit_cap_shape(sweep)
    curve = predicted_curve(shape, sweep.values)
    top = int(np.argmax(sweep.values))
    energy = np.array([o.energy_ratio for o in curve]) / curve[top].energy_ratio
    times = np.array([1 + o.slowdown_pct / 100 for o in curve]) / (1 + curve[top].slowdown_pct / 100)
    choice = interval_on_curve(sweep.values, energy, times, max_slowdown_pct=bound_pct)
    return float(sweep.values[choice.best]), choice


def _measured_optimum_w(sweep: Sweep, bound_pct: float) -> float:
    return choose_setting(sweep, "energy", max_slowdown_pct=bound_pct).power_limit_w


def test_the_rule_keeps_within_the_bound_and_above_the_floor():
    limits = np.array([100.0, 150.0, 200.0, 250.0, 300.0])
    energy = np.array([0.70, 0.75, 0.80, 0.90, 1.0])
    times = np.array([1.60, 1.30, 1.08, 1.02, 1.0])
    assert interval_on_curve(limits, energy, times, max_slowdown_pct=None).best == 0
    assert limits[interval_on_curve(limits, energy, times, max_slowdown_pct=10.0).best] == 200.0
    assert limits[interval_on_curve(limits, energy, times, max_slowdown_pct=None, floor_w=150.0).best] == 150.0
    # Nothing within the bound: the default limit (the highest) qualifies.
    assert limits[interval_on_curve(limits, energy, times, max_slowdown_pct=0.5).best] == 300.0


@pytest.mark.parametrize("name", ["A40+resnet50", "A40+bert-base-uncased", "V100+resnet50", "V100+bert-base-uncased"])
@pytest.mark.parametrize("workload_class", sorted(BOUNDS))
def test_on_each_zeus_profile_the_best_limit_is_within_one_step_of_the_measured_optimum(name, workload_class):
    sweep = load_sweep(SWEEPS / f"zeus_testprofile_{name}+gpu0.csv")
    bound = BOUNDS[workload_class]
    best_w, choice = _model_interval(sweep, bound)
    measured_w = _measured_optimum_w(sweep, bound)
    assert abs(best_w - measured_w) <= STEP_W
    assert choice.low_w - STEP_W <= measured_w <= choice.high_w + STEP_W


@pytest.mark.slow
@pytest.mark.parametrize("gpu", ["a40", "v100", "p100", "rtx6000"])
def test_on_the_nsdi23_sweeps_the_interval_holds_the_measured_optimum(gpu):
    """Every NSDI'23 workload of the file, under the throughput (10%) and background (25%) bounds.
    Measured: the interval within one step of the measured optimum for 94.3% (A40), 100% (P100),
    94.2% (RTX 6000), 100% (V100) of workloads at 10% (98.1-100% at 25%); its best limit alone within
    one step for 58.5%, 51.1%, 63.5%, 72.1% (62.3-72.1% at 25%). The P100's intervals are wide
    (125 W: its energy curves are flat within 1%), so its 100% says less than the others'."""
    sweeps = load_sweeps(SWEEPS / f"zeus_nsdi23_summary_power_{gpu}.csv")
    for bound in BOUNDS.values():
        in_interval, at_best = [], []
        for sweep in sweeps.values():
            best_w, choice = _model_interval(sweep, bound)
            measured_w = _measured_optimum_w(sweep, bound)
            in_interval.append(choice.low_w - STEP_W <= measured_w <= choice.high_w + STEP_W)
            at_best.append(abs(best_w - measured_w) <= STEP_W)
        assert np.mean(in_interval) >= 0.9, (gpu, bound)
        assert np.mean(at_best) >= 0.45, (gpu, bound)
