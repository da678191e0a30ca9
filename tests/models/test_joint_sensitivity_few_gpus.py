"""The day's idle and bandwidth parts of a scope with too few GPUs for a bootstrap come from the
within-model OLS errors; read with the normal's 1.96 instead of the t quantile of their residual
degrees of freedom, a scope of 3 GPUs over 3 hours (7 degrees of freedom) held the drawn truth
90.7% of the time. Truths are drawn here, so whether each interval covers its truth is known."""

from __future__ import annotations

import duckdb
import numpy as np

from joulehouse.models.joint_sensitivity import Weights, joint_sensitivities
from test_joint_sensitivity_intervals import BW_SLOPE, DAY, IDLE_SLOPE, _windows


def test_the_daily_parts_of_a_scope_of_few_gpus_cover_their_truth_95_percent_of_the_time():
    con = duckdb.connect()
    con.execute("CREATE TABLE fct_link_bandwidth_hourly (day DATE)")  # S needs it to exist; no PUE here
    rng = np.random.default_rng(3)
    truth = {"joint_part_idle_share": IDLE_SLOPE, "joint_part_network_bandwidth": BW_SLOPE}
    covered, total = 0, 0
    for _ in range(1000):  # 3 hours of 3 GPUs each day: under the bootstrap's 4 GPUs
        for s in joint_sensitivities(con, DAY, Weights(0.5, 0.5), bootstrap_reps=2, gpu_hours=_windows(rng, 3, 3)):
            if s.quantity in truth:
                assert s.method == "ols-fe"
                covered += s.ci_low <= truth[s.quantity] <= s.ci_high
                total += 1
    assert total == 2000
    assert 0.935 <= covered / total <= 0.965, f"{covered / total:.3f} of the intervals hold the truth"
