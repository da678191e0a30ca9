"""Sensitivities on the simulated fleet, whose truth is known in sign and size (collectors.sim):
PUE = 1.10 + 0.008/C above 5 C outdoors and does not depend on IT load; GPU power is affine in
activity with a positive static part, so energy's elasticity to activity lies in (0, 1)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from joulehouse.models.sensitivity import _within_model_solution, sensitivity_day


def _by_quantity(found):
    return {(s.quantity, s.scope): s for s in found}


def test_pue_rises_with_outdoor_temperature_at_the_simulated_rate(sim_warehouse):
    found = _by_quantity(sensitivity_day(sim_warehouse.con, sim_warehouse.day, bootstrap_reps=100))
    temp = found[("pue_per_outdoor_c", "site-a")]
    assert temp.ci_low <= 0.008 <= temp.ci_high  # the simulator's chiller slope, 1/C
    assert temp.ci_low > 0
    load = found[("pue_elasticity_to_it_load", "site-a")]
    assert load.ci_low <= 0.0 <= load.ci_high  # the simulated PUE ignores IT load
    assert abs(load.estimate) < 0.05


def test_energy_rises_with_utilization_more_than_with_bandwidth(sim_warehouse):
    found = _by_quantity(sensitivity_day(sim_warehouse.con, sim_warehouse.day, bootstrap_reps=100))
    util = found[("energy_elasticity_to_utilization", "fleet")]
    dram = found[("energy_elasticity_to_memory_bandwidth", "fleet")]
    assert 0.2 < util.ci_low <= util.estimate <= util.ci_high < 1.0
    assert dram.ci_high > 0 and dram.estimate < util.estimate
    assert util.n_groups == 16 and util.method == "ols-fe+gpu-bootstrap"


@pytest.mark.slow  # two sensitivity fits of a simulated day (about 1 s)
def test_a_rerun_replaces_the_day(sim_warehouse):
    con, day = sim_warehouse.con, sim_warehouse.day
    sensitivity_day(con, day, bootstrap_reps=20)
    first = con.execute("SELECT count(*) FROM fct_sensitivity_daily WHERE day = ?", [day]).fetchone()[0]
    sensitivity_day(con, day, bootstrap_reps=20)
    assert con.execute("SELECT count(*) FROM fct_sensitivity_daily WHERE day = ?", [day]).fetchone()[0] == first >= 4


@hsettings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), e_util=st.floats(0.1, 1.0), e_dram=st.floats(-0.2, 0.5))
def test_per_gpu_sums_give_the_row_level_fixed_effects_fit(seed, e_util, e_dram):
    """Summing per GPU, then per model, then demeaning equals a row-level fit with model dummies."""
    rng = np.random.default_rng(seed)
    rows, stats = [], []
    for g in range(6):
        model = "a" if g < 3 else "b"
        n = int(rng.integers(5, 20))
        x1, x2 = rng.normal(-0.5, 0.3, n), rng.normal(-1.0, 0.4, n)
        y = (1.0 if model == "a" else 2.0) + e_util * x1 + e_dram * x2 + rng.normal(0, 0.01, n)
        rows += [(model, a, b, c) for a, b, c in zip(x1, x2, y)]
        stats.append({"gpu_model": model, "n": n, "s_1": x1.sum(), "s_2": x2.sum(), "s_y": y.sum(),
                      "s_11": x1 @ x1, "s_12": x1 @ x2, "s_22": x2 @ x2, "s_1y": x1 @ y, "s_2y": x2 @ y, "s_yy": y @ y})
    design = np.array([[r[1], r[2], r[0] == "a", r[0] == "b"] for r in rows], float)
    expected = np.linalg.lstsq(design, np.array([r[3] for r in rows]), rcond=None)[0][:2]
    beta = _within_model_solution(stats)[0]
    assert np.allclose(beta, expected, atol=1e-8)


def test_a_bootstrap_without_two_solvable_resamples_gives_the_ols_interval(sim_warehouse):
    """With too few resamples that could be solved (one here; few GPUs whose activity varies in
    general) the bootstrap's standard error was NaN (std of one draw) and so was every interval
    built on it; the within-model OLS interval stands in, and says so in `method`."""
    from joulehouse.models.sensitivity import energy_elasticities

    found = {s.quantity: s for s in energy_elasticities(sim_warehouse.con, sim_warehouse.day, bootstrap_reps=1)}
    util = found["energy_elasticity_to_utilization"]
    assert util.method == "ols-fe" and np.isfinite(util.std_error) and util.std_error > 0
    assert util.ci_low < util.estimate < util.ci_high
