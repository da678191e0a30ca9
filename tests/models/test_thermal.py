"""Thermal resistance and time constant per GPU, against the simulator's ground truth."""

from __future__ import annotations

import datetime as dt

import duckdb
import pytest

from collectors.sim import simulate_fleet
from models.thermal import fit_thermal_day

DAY = dt.date(2026, 3, 2)


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    lake = tmp_path_factory.mktemp("thermal") / "lake"
    lake.mkdir()
    return lake, simulate_fleet(lake, gpus=16, days=1, start=DAY, seed=3, interval_s=10)


def _connect(lake, with_inlet: bool):
    con = duckdb.connect()
    con.execute("CREATE TABLE stg_gpu_samples AS SELECT *, CAST(sampled_at AS DATE) AS day "
                "FROM read_parquet(? || '/gpu_samples/**/*.parquet', hive_partitioning = true)", [str(lake)])
    if with_inlet:
        con.execute("CREATE TABLE stg_node_samples AS SELECT * "
                    "FROM read_parquet(? || '/node_samples/**/*.parquet', hive_partitioning = true)", [str(lake)])
    return con


@pytest.mark.parametrize("with_inlet,theta_tol", [(True, 0.03), (False, 0.05)])
def test_theta_tau_and_outliers_match_the_simulated_slots(sim, with_inlet, theta_tol):
    lake, summary = sim
    con = _connect(lake, with_inlet)
    assert fit_thermal_day(con, DAY) == len(summary.gpus)
    got = {r[0]: r[1:] for r in con.execute(
        "SELECT gpu_uuid, theta_c_per_w, tau_s, is_outlier, inlet_source, rank_in_model FROM fct_thermal_gpu").fetchall()}
    for gpu in summary.gpus:
        theta, tau, outlier, source, rank = got[gpu.uuid]
        assert theta == pytest.approx(gpu.theta_c_per_w, rel=theta_tol)
        assert tau == pytest.approx(gpu.thermal_tau_s, rel=0.15)
        assert outlier == gpu.badly_cooled
        assert source == ("node_samples" if with_inlet else "estimated")
        if gpu.badly_cooled:
            assert rank >= 7  # worst-cooled rank last within its model (8 per model here)


def test_rerun_replaces_the_day(sim):
    lake, summary = sim
    con = _connect(lake, True)
    fit_thermal_day(con, DAY)
    fit_thermal_day(con, DAY)
    assert con.execute("SELECT count(*) FROM fct_thermal_gpu").fetchone()[0] == len(summary.gpus)
