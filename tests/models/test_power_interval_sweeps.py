"""The best power interval's rule (models.power_interval.interval_on_curve) on measured Zeus sweeps:
the cap model fitted to each sweep (models.cap_calibration), its curve through the same choice the
warehouse makes, against the measured energy optimum under the same slowdown bound
(models.sweeps.choose_setting). Zeus sweeps step the limit by 25 W: "within one step" is 25 W."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from joulehouse.models.cap_calibration import CapShape, fit_cap_shape, predicted_curve, sweep_interval
from joulehouse.models.power_interval import interval_on_curve
from joulehouse.models.settings import RecommendSettings
from joulehouse.models.sweeps import Sweep, choose_setting, load_sweep, load_sweeps

SWEEPS = Path(__file__).resolve().parents[3] / "shared" / "data" / "sweeps"
STEP_W = 25.0
BOUNDS = {"throughput": RecommendSettings().max_slowdown_throughput_pct,
          "background": RecommendSettings().max_slowdown_background_pct}


def _model_interval(sweep: Sweep, bound_pct: float, shape: CapShape | None = None):
    shape = shape or fit_cap_shape(sweep)
    curve = predicted_curve(shape, sweep.values)
    top = int(np.argmax(sweep.values))
    energy = np.array([o.energy_ratio for o in curve]) / curve[top].energy_ratio
    times = np.array([1 + o.slowdown_pct / 100 for o in curve]) / (1 + curve[top].slowdown_pct / 100)
    choice = interval_on_curve(sweep.values, energy, times, max_slowdown_pct=bound_pct)
    return float(sweep.values[choice.best]), choice


def _measured_optimum_w(sweep: Sweep, bound_pct: float) -> float:
    return choose_setting(sweep, "energy", max_slowdown_pct=bound_pct).power_limit_w


def test_the_fastest_limit_qualifies_not_the_highest():
    """A sweep fastest at 200 W whose 260 W runs 5.9% slower: the highest limit always qualified,
    and a 2% bound's interval was 260 W."""
    limits = np.array([150.0, 200.0, 225.0, 260.0])
    times = np.array([1.05, 1.0, 1.002, 1.059])
    energy = np.array([0.95, 1.06, 1.04, 1.0])
    choice = interval_on_curve(limits, energy, times, max_slowdown_pct=2.0)
    assert limits[choice.best] == 225.0 and choice.high_w <= 225.0
    none_within = interval_on_curve(limits, energy, times, max_slowdown_pct=0.0)
    assert limits[none_within.best] == 200.0


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
    # The readings kept at the measured limits: the interval holds the optimum (A40 BERT at 10%:
    # 245-275 W around the measured 275 W, its best 30 W below it, between two readings).
    _, _, _, kept = sweep_interval(sweep, bound)
    assert kept.low_w - STEP_W <= measured_w <= kept.high_w + STEP_W


# The one workload whose measured optimum no monotone curve reaches: on the RTX 6000, BERT batch 8
# reads 1.248, 1.043, 1.170, 1.191, 1.034, 1.019, 1.045, 1.000 x the fastest time at 100..260 W.
# The 10% optimum (125 W) rests on one reading that is 12-14% faster than those at 150 and 175 W;
# a tighter cap cannot make the same work faster, and the seven other readings are monotone
# within 3% without it. The model (time non-increasing in the limit, as every cap model is)
# follows the seven and puts the bounded optimum at 175 W. The interval users get from a sweep
# (`caps from-sweep`, models.cap_calibration.sweep_interval) keeps the measurements and holds it
# (the test after this one); this test checks the model alone, as the fleet's curves use it.
NON_MONOTONE = {("rtx6000", 10.0, "sentiment140/bert_base_uncased/8/adamw")}


def _faster_than_two_higher_limits_pct(sweep: Sweep, limit_w: float) -> float:
    """How much faster (%) the reading at `limit_w` is than the two slowest readings at higher limits
    (the lesser of the two margins)."""
    at = sweep.time_s[sweep.values == limit_w][0]
    higher = np.sort(sweep.time_s[sweep.values > limit_w])
    return 100.0 * (higher[-2] / at - 1.0) if len(higher) > 1 else 0.0


@pytest.mark.slow
@pytest.mark.parametrize("gpu", ["a40", "v100", "p100", "rtx6000"])
def test_on_the_nsdi23_sweeps_the_interval_holds_the_measured_optimum(gpu):
    """Every NSDI'23 workload of the file, under the throughput (10%) and background (25%) bounds:
    the interval within one step of the measured optimum for all workloads at both bounds on the
    A40, V100 and P100, and for all but the one in NON_MONOTONE on the RTX 6000 (98.1% at 10%,
    100% at 25%). Before the cap shape could be memory-bound and before times were counted from
    the fastest reading: 94.3%/98.1% (A40), 100/100 (P100), 94.2/100 (RTX 6000), 100/100 (V100).
    The best limit alone within one step: 62.3/64.2% (A40), 72.1/72.1 (V100), 48.9/51.1 (P100),
    67.3/69.2 (RTX 6000). The P100's intervals are wide (125 W: its energy curves are flat within
    1%), so its 100% says less than the others'."""
    sweeps = load_sweeps(SWEEPS / f"zeus_nsdi23_summary_power_{gpu}.csv")
    shapes = {label: fit_cap_shape(sweep) for label, sweep in sweeps.items()}
    for bound in BOUNDS.values():
        misses, at_best = [], []
        for label, sweep in sweeps.items():
            best_w, choice = _model_interval(sweep, bound, shapes[label])
            measured_w = _measured_optimum_w(sweep, bound)
            if not choice.low_w - STEP_W <= measured_w <= choice.high_w + STEP_W:
                misses.append((label, measured_w, choice.low_w, choice.high_w))
            at_best.append(abs(best_w - measured_w) <= STEP_W)
        expected = sorted(label for g, b, label in NON_MONOTONE if (g, b) == (gpu, bound))
        assert sorted(m[0] for m in misses) == expected, (gpu, bound, misses)
        for label, measured_w, _, _ in misses:
            # The exception holds only while its reason does: the measured optimum's reading beats
            # two readings at higher limits by more than the bound.
            assert _faster_than_two_higher_limits_pct(sweeps[label], measured_w) > bound
        assert np.mean(at_best) >= 0.45, (gpu, bound)


def _own_step_w(sweep: Sweep, limit_w: float) -> float:
    """The sweep's step at `limit_w`: the wider gap to its measured neighbours (some NSDI'23 A40
    BERT workloads were measured every 50 W, the rest every 25 W; the RTX 6000's top step is 10 W)."""
    limits = np.unique(sweep.values)
    i = int(np.searchsorted(limits, limit_w))
    return float(max(np.diff(limits)[max(i - 1, 0):i + 1]))


@pytest.mark.slow
@pytest.mark.parametrize("gpu", ["a40", "v100", "p100", "rtx6000"])
def test_the_sweep_interval_holds_the_measured_optimum_on_every_nsdi23_workload(gpu):
    """models.cap_calibration.sweep_interval (the measurements at the measured limits, the fitted
    model between them, 5 W apart): on every workload and both bounds the interval lies within one
    of the sweep's own steps of the measured optimum, the one NON_MONOTONE workload included (at
    10% on the RTX 6000 BERT batch 8: 120-125 W against the measured 125 W; the model alone says
    175 W). Within 25 W on every workload except three A40 BERT sweeps measured every 50 W (batch
    16, 64, 128 at 10%), where the interval sits 35-45 W below the 50 W-grid optimum, at limits
    the sweep never measured."""
    sweeps = load_sweeps(SWEEPS / f"zeus_nsdi23_summary_power_{gpu}.csv")
    for bound in BOUNDS.values():
        beyond_25_w = []
        for label, sweep in sweeps.items():
            limits, energy, times, choice = sweep_interval(sweep, bound)
            measured_w = _measured_optimum_w(sweep, bound)
            step_w = _own_step_w(sweep, measured_w)
            assert choice.low_w - step_w <= measured_w <= choice.high_w + step_w, (gpu, bound, label, choice)
            assert abs(limits[choice.best] - measured_w) <= step_w, (gpu, bound, label)
            assert times[choice.best] <= 1 + bound / 100 + 1e-9  # the bound holds on the curve it chose on
            if not choice.low_w - STEP_W <= measured_w <= choice.high_w + STEP_W:
                beyond_25_w.append(label)
                assert step_w == 50.0
        expected = {("a40", 10.0): ["sentiment140/bert_base_uncased/128/adamw",
                                    "sentiment140/bert_base_uncased/16/adamw",
                                    "sentiment140/bert_base_uncased/64/adamw"]}.get((gpu, bound), [])
        assert sorted(beyond_25_w) == expected, (gpu, bound)


def test_the_sweep_interval_keeps_a_measured_non_monotone_optimum_the_model_misses():
    """A hand-written sweep with the RTX 6000 BERT batch 8 shape: one tight limit reads faster than
    two looser ones. The measurement decides at the limits it covers, so the 10% optimum stays at
    125 W; the model alone (time never falls as the cap tightens) goes higher."""
    limits = [100.0, 125.0, 150.0, 175.0, 200.0, 225.0, 250.0]
    time_s = [1.25, 1.04, 1.17, 1.19, 1.03, 1.02, 1.00]
    power_w = [99.0, 123.0, 147.0, 171.0, 196.0, 219.0, 237.0]
    sweep = Sweep.of_power_limits("hand/non-monotone", limits, time_s, np.multiply(time_s, power_w))
    assert _measured_optimum_w(sweep, 10.0) == 125.0
    grid, energy, times, choice = sweep_interval(sweep, 10.0)
    assert abs(grid[choice.best] - 125.0) <= STEP_W and choice.low_w <= 125.0 <= choice.high_w + STEP_W
    assert times[list(grid).index(150.0)] == pytest.approx(1.17 / 1.00)  # a measured limit keeps its reading
    model_w, _ = _model_interval(sweep, 10.0)
    assert model_w >= 150.0  # what the measurement corrects


def test_between_two_readings_outside_the_bound_no_limit_is_within_it():
    """A knee the model puts between two measured limits is not measured: with readings 12% slower
    at both 200 and 250 W, nothing between them counts as within a 10% bound (the clip; without
    it the fitted shape's knee put 210 W within the bound)."""
    limits = [100.0, 150.0, 200.0, 250.0, 300.0]
    time_s = [4.0, 2.0, 1.12, 1.12, 1.00]
    power_w = [95.0, 140.0, 170.0, 200.0, 230.0]
    sweep = Sweep.of_power_limits("hand/coarse", limits, time_s, np.multiply(time_s, power_w))
    grid, energy, times, choice = sweep_interval(sweep, 10.0)
    between = (grid > 200.0) & (grid < 250.0)
    assert np.all(times[between] >= 1.12 - 1e-12)
    assert grid[choice.best] > 250.0
