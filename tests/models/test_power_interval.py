"""Best power interval and energy-vs-limit curves on the simulated fleet-day: the energy optimum
within each workload class's slowdown bound, as the recommender chooses a cap."""

from __future__ import annotations

import numpy as np
import pytest

from joulehouse.models.power_interval import CAPPED_CLASSES, MIX, power_interval_day
from joulehouse.models.recommend import recommend_day
from joulehouse.models.settings import RecommendSettings

SETTINGS = RecommendSettings()
BOUND = {"throughput": SETTINGS.max_slowdown_throughput_pct, "background": SETTINGS.max_slowdown_background_pct}


@pytest.mark.slow
def test_intervals_are_the_least_energy_within_the_class_bound_and_curves_are_stored(fitted):
    con, day = fitted.con, fitted.day
    every, curve = power_interval_day(con, day, SETTINGS)
    intervals = [i for i in every if i.bottleneck != MIX]
    models = {i.gpu_model for i in intervals}
    # The class's GPUs together ('mix', no curve of their own): the same rule on the recommender's bins.
    mixes = [i for i in every if i.bottleneck == MIX]
    assert {i.gpu_model for i in mixes} == models and {i.workload_class for i in mixes} <= set(CAPPED_CLASSES)
    for i in mixes:
        assert i.best_limit_w_low <= i.best_limit_w <= i.best_limit_w_high <= i.default_limit_w
        assert i.best_limit_w_low >= SETTINGS.min_limit_share_of_default * i.default_limit_w - 1e-9
        assert i.heavy_slowdown_at_best_pct <= i.max_slowdown_pct + 2e-9 and 0 < i.busy_share <= 1
    assert models == {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}
    assert {(i.gpu_model, i.bottleneck, i.workload_class) for i in intervals} == {
        (i.gpu_model, i.bottleneck, c) for i in intervals for c in CAPPED_CLASSES}
    for i in intervals:
        assert i.max_slowdown_pct == BOUND[i.workload_class]
        assert i.best_limit_w_low <= i.best_limit_w <= i.best_limit_w_high <= i.default_limit_w
        assert i.best_limit_w_low >= SETTINGS.min_limit_share_of_default * i.default_limit_w - 1e-9
        assert i.slowdown_at_best_pct <= i.heavy_slowdown_at_best_pct + 1e-9 <= i.max_slowdown_pct + 2e-9
        points = [r for r in curve if (r["gpu_model"], r["bottleneck"]) == (i.gpu_model, i.bottleneck)]
        # The heavy half's time falls as the limit rises, so the limits within the bound are those
        # above a threshold: the best has the least energy of every limit above it.
        best = next(r for r in points if r["power_limit_w"] == i.best_limit_w)
        above = [r for r in points if r["power_limit_w"] >= i.best_limit_w]
        assert best["relative_energy"] <= min(r["relative_energy"] for r in above) + 1e-12
        least = best
        assert i.perf_per_watt_gain_pct == pytest.approx(100 * (1 / least["relative_energy"] - 1))
        at_default = next(r for r in points if r["power_limit_w"] == i.default_limit_w)
        assert at_default["relative_energy"] == pytest.approx(1.0) and at_default["relative_time"] == pytest.approx(1.0)
        times = [r["relative_time"] for r in sorted(points, key=lambda r: r["power_limit_w"])]
        assert all(a >= b - 1e-9 for a, b in zip(times, times[1:]))  # lower limits never run faster
    compute = [i for i in intervals if i.bottleneck == "compute-bound"]
    assert all(i.perf_per_watt_gain_pct > 2 for i in compute)  # a cap pays within the bound
    # A looser bound never moves the optimum up.
    by_key = {(i.gpu_model, i.bottleneck, i.workload_class): i for i in intervals}
    for (model, bottleneck, cls), i in by_key.items():
        if cls == "background":
            assert i.best_limit_w <= by_key[(model, bottleneck, "throughput")].best_limit_w
    for model in models:
        dominant = {r["bottleneck"] for r in curve if r["gpu_model"] == model and r["is_dominant_bottleneck"]}
        assert dominant == {"compute-bound"}
    n = con.execute("SELECT count(*) FROM fct_energy_vs_limit WHERE day = ?", [day]).fetchone()[0]
    assert n == len(curve)
    assert con.execute("SELECT count(*) FROM fct_power_interval WHERE day = ?", [day]).fetchone()[0] == len(every)


@pytest.mark.slow
def test_the_interval_agrees_with_the_recommended_caps(fitted):
    """The caps the recommender sets on throughput GPUs sit by the throughput interval of their
    model's dominant bottleneck: the median within one limit step, each within two (the recommender
    scores each GPU's own mix of activity, the interval the model's). Measured (seed 11): A100
    interval 265 W, caps 250-275 W (median 275); H100 430-435 W, caps 400-450 W (median 425). The
    'mix' row (the throughput GPUs together, on the recommender's bins) holds them as well: A100
    260-265 W, H100 430-435 W. On the demo's H200s, whose work is 52% compute- and 40% memory-bound,
    the mix row (375-385 W) is what caps of 350 W sit by; compute-bound alone is 410-415 W."""
    con, day = fitted.con, fitted.day
    intervals = power_interval_day(con, day, SETTINGS)[0]
    recommend_day(con, day, RecommendSettings(holdout_share=0.0))
    caps = con.execute(
        "SELECT gpu_model, list(power_limit_w) FROM fct_recommendation WHERE day = ? AND workload_class = 'throughput' "
        "AND locked_sm_clock_max_mhz IS NULL AND power_limit_w < default_limit_w GROUP BY gpu_model", [day]).fetchall()
    assert {model for model, _ in caps} == {i.gpu_model for i in intervals}
    step = SETTINGS.limit_step_w
    for model, limits_w in caps:
        for bottleneck in ("compute-bound", MIX):
            i = next(i for i in intervals if i.gpu_model == model and i.bottleneck == bottleneck
                     and i.workload_class == "throughput")
            assert i.best_limit_w_low - step <= float(np.median(limits_w)) <= i.best_limit_w_high + step, (model, limits_w, i)
            assert all(i.best_limit_w_low - 2 * step <= w <= i.best_limit_w_high + 2 * step for w in limits_w), (model, limits_w)


@pytest.mark.slow
def test_a_what_if_bound_replaces_the_class_bounds(fitted):
    con, day = fitted.con, fitted.day
    tight = {(i.gpu_model, i.bottleneck): i for i in power_interval_day(con, day, max_slowdown_pct=2.0)[0]}
    loose = {(i.gpu_model, i.bottleneck): i for i in power_interval_day(con, day, max_slowdown_pct=50.0)[0]}
    for key, i in tight.items():
        assert i.max_slowdown_pct == 2.0 and i.heavy_slowdown_at_best_pct <= 2.0 + 1e-9
        assert i.best_limit_w >= loose[key].best_limit_w
        assert 0.0 <= i.perf_per_watt_gain_pct <= loose[key].perf_per_watt_gain_pct + 1e-9


def test_a_busy_samples_unread_memory_or_pcie_is_left_out_of_its_groups_means():
    """The operating points the curves are drawn at: a sample whose DRAM activity (or one PCIe
    direction) was not read counted as 0, so half the samples unread halved the group's memory
    mean (0.4 for 0.8) and the PCIe one; they now skip what was not read, as the fit does."""
    import datetime as dt

    import duckdb

    from joulehouse.models.activity import create_activity_macros
    from joulehouse.models.sql import load_sql

    day = dt.date(2026, 3, 2)
    con = duckdb.connect()
    create_activity_macros(con)
    con.execute("CREATE TABLE link_capacity_by_model (gpu_model VARCHAR, pcie_capacity_bytes_per_s DOUBLE)")
    con.execute("""CREATE TABLE gpu_activity_samples AS SELECT
        'NVIDIA A100-SXM4-80GB' AS gpu_model, DATE '2026-03-02' AS day, 300.0 AS power_w, 'sm_active' AS activity_kind,
        0.9 AS activity_ratio, 0.9 AS sm_active_ratio, CASE WHEN i % 2 = 0 THEN 0.8 END AS memory_ratio,
        CASE WHEN i % 2 = 0 THEN 0.8 END AS dram_active_ratio, NULL::FLOAT AS util_gpu_pct, NULL::FLOAT AS util_mem_pct,
        2e9::BIGINT AS pcie_tx_bytes_per_s, CASE WHEN i % 2 = 0 THEN 2e9::BIGINT END AS pcie_rx_bytes_per_s,
        60.0 AS temp_c, 400.0 AS power_limit_w FROM range(100) t(i)""")
    (row,) = con.execute(load_sql("power_interval_profiles"), {"day": day, "pcie_link_gbps": 64.0,
                                                               "sm_active_models": ["NVIDIA A100-SXM4-80GB"],
                                                               "util_gpu_models": []}).fetchall()
    names = [d[0] for d in con.description]
    got = dict(zip(names, row))
    assert got["bottleneck"] == "compute-bound" and got["n_samples"] == 100
    assert got["memory_ratio"] == pytest.approx(0.8) and got["heavy_memory_ratio"] == pytest.approx(0.8)
    assert got["pcie_gbps"] == pytest.approx(4.0)
