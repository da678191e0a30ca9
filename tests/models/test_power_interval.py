"""Best power-limit interval and energy-vs-limit curves on the simulated fleet-day."""

from __future__ import annotations

import pytest

from joulehouse.models.power_interval import power_interval_day


@pytest.mark.slow
def test_intervals_bracket_the_least_energy_limit_and_curves_are_stored(fitted):
    con, day = fitted.con, fitted.day
    intervals, curve = power_interval_day(con, day)
    models = {i.gpu_model for i in intervals}
    assert models == {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}
    for i in intervals:
        assert i.best_limit_w_low <= i.best_limit_w <= i.best_limit_w_high <= i.default_limit_w
        points = [r for r in curve if (r["gpu_model"], r["bottleneck"]) == (i.gpu_model, i.bottleneck)]
        least = min(points, key=lambda r: r["relative_energy"])
        assert least["power_limit_w"] == i.best_limit_w
        assert i.perf_per_watt_gain_pct == pytest.approx(100 * (1 / least["relative_energy"] - 1))
        at_default = next(r for r in points if r["power_limit_w"] == i.default_limit_w)
        assert at_default["relative_energy"] == pytest.approx(1.0) and at_default["relative_time"] == pytest.approx(1.0)
        # Lower limits never run faster.
        times = [r["relative_time"] for r in sorted(points, key=lambda r: r["power_limit_w"])]
        assert all(a >= b - 1e-9 for a, b in zip(times, times[1:]))
    compute = {i.gpu_model: i for i in intervals if i.bottleneck == "compute-bound"}
    assert all(i.perf_per_watt_gain_pct > 5 for i in compute.values())  # cubic dynamic power: caps pay
    for model in models:
        dominant = {r["bottleneck"] for r in curve if r["gpu_model"] == model and r["is_dominant_bottleneck"]}
        assert dominant == {"compute-bound"}
    n = con.execute("SELECT count(*) FROM fct_energy_vs_limit WHERE day = ?", [day]).fetchone()[0]
    assert n == len(curve)


@pytest.mark.slow
def test_a_slowdown_bound_moves_the_best_limit_up(fitted):
    con, day = fitted.con, fitted.day
    free = {(i.gpu_model, i.bottleneck): i for i in power_interval_day(con, day)[0]}
    bound = {(i.gpu_model, i.bottleneck): i for i in power_interval_day(con, day, max_slowdown_pct=10.0)[0]}
    for key, i in bound.items():
        assert i.slowdown_at_best_pct <= 10.0 + 1e-9
        assert i.best_limit_w >= free[key].best_limit_w
        assert 0.0 <= i.perf_per_watt_gain_pct <= free[key].perf_per_watt_gain_pct + 1e-9
    assert con.execute("SELECT count(*) FROM fct_power_interval WHERE day = ?", [day]).fetchone()[0] == len(bound)
