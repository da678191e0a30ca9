"""The joint sensitivity S on the simulated fleet, whose truth is known in sign: more power comes
with less idle time (the idle-share part is negative), group training moves NVLink with its SM
activity (the bandwidth part is positive), and the simulated PUE ignores IT load (its part is 0)."""

from __future__ import annotations

import pytest

from joulehouse.models.bandwidth import link_bandwidth_day
from joulehouse.models.joint_sensitivity import Weights
from joulehouse.models.sensitivity import sensitivity_day
from joulehouse.models.settings import SensitivitySettings


@pytest.fixture(scope="module")
def joint(sim_warehouse):
    link_bandwidth_day(sim_warehouse.con, sim_warehouse.day)
    found = sensitivity_day(sim_warehouse.con, sim_warehouse.day, SensitivitySettings(), bootstrap_reps=100)
    return {(s.quantity, s.scope): s for s in found}


def test_parts_have_the_simulated_signs(joint):
    for scope in ("fleet", "throughput"):
        idle = joint[("joint_part_idle_share", scope)]
        assert idle.ci_high < 0, (scope, idle)
    bw = joint[("joint_part_network_bandwidth", "throughput")]
    assert bw.ci_low > 0
    pue = joint[("joint_part_pue", "fleet")]
    assert pue.ci_low <= 0.0 <= pue.ci_high and abs(pue.estimate) < 0.05
    assert joint[("energy_elasticity_to_network_bandwidth", "fleet")].ci_high > 0


def test_s_is_its_parts_weighted_and_states_the_weights_and_the_typical_value(joint):
    for scope in ("fleet", "throughput", "latency-sensitive"):
        s = joint[("joint_sensitivity_s", scope)]
        parts = [joint[(q, scope)].estimate for q in ("joint_part_pue", "joint_part_idle_share",
                                                     "joint_part_network_bandwidth")]
        assert (s.weight_utilization, s.weight_network_bandwidth) == (0.5, 0.5)
        assert s.estimate == pytest.approx(parts[0] + 0.5 * parts[1] + 0.5 * parts[2])
        assert s.ci_low < s.estimate < s.ci_high
    train = joint[("joint_sensitivity_s", "throughput")]
    assert train.typical_workload == "training-dense"
    assert train.typical_value == pytest.approx(0.18 + 0.5 * -0.62 + 0.5 * 0.41)
    assert joint[("joint_part_idle_share", "latency-sensitive")].typical_value == -0.33
    assert joint[("joint_sensitivity_s", "fleet")].typical_value is None


def test_the_row_in_the_warehouse_carries_the_weights(sim_warehouse, joint):
    con, day = sim_warehouse.con, sim_warehouse.day
    sensitivity_day(con, day, SensitivitySettings(weight_utilization=0.6, weight_network_bandwidth=0.2), bootstrap_reps=30)
    weights = con.execute("SELECT weight_utilization, weight_network_bandwidth FROM fct_sensitivity_daily "
                          "WHERE day = ? AND quantity = 'joint_sensitivity_s' AND scope = 'fleet'", [day]).fetchone()
    assert weights == pytest.approx((0.75, 0.25)), "normalised to sum to 1"
    n = con.execute("SELECT count(*) FROM fct_sensitivity_daily WHERE day = ?", [day]).fetchone()[0]
    sensitivity_day(con, day, bootstrap_reps=30)
    assert con.execute("SELECT count(*) FROM fct_sensitivity_daily WHERE day = ?", [day]).fetchone()[0] == n


def test_sliding_windows_follow_the_day(sim_warehouse, joint):
    con, day = sim_warehouse.con, sim_warehouse.day
    rows = con.execute("SELECT hour_at, window_hours, estimate, ci_low, ci_high, n_obs FROM fct_sensitivity_hourly "
                       "WHERE day = ? AND scope = 'fleet' AND quantity = 'joint_part_idle_share' ORDER BY hour_at",
                       [day]).fetchall()
    assert len(rows) >= 20, "about one window per hour"
    assert max(r[1] for r in rows) == 6 and rows[0][1] < 6, "the first windows are shorter and say so"
    assert all(lo <= est <= hi for _, _, est, lo, hi, _ in rows)
    negative = sum(1 for r in rows if r[2] < 0)
    assert negative >= 0.8 * len(rows), "the idle-share part is negative in most windows"
    (s_rows,) = con.execute("SELECT count(*) FROM fct_sensitivity_hourly WHERE day = ? AND quantity = "
                            "'joint_sensitivity_s' AND weight_utilization = 0.5", [day]).fetchone()
    assert s_rows > 0


def test_weights_both_zero_are_refused_in_one_line():
    with pytest.raises(ValueError, match=r"both 0"):
        Weights.from_settings(SensitivitySettings(weight_utilization=0, weight_network_bandwidth=0))


def test_the_bootstrap_sums_of_whole_gpus_are_the_row_by_row_sums_to_the_last_bit():
    """The bootstrap sums each GPU's terms computed once (_ResampledSums) instead of the sample's
    rows; a draw must give the very numbers the row-by-row sums give, repeats and idle hours included."""
    import numpy as np

    from joulehouse.models.joint_sensitivity import _elasticity_stats, _ResampledSums, _semi_slopes

    rng = np.random.default_rng(11)
    gpus = [[{"gpu_uuid": f"GPU-{g}", "gpu_model": "A100" if g % 3 else "H100",
              "energy_kwh": float(rng.uniform(0.05, 0.7)),
              "activity_ratio": float(rng.choice([0.0, 0.01, rng.uniform(0.02, 1.0)], p=[0.1, 0.1, 0.8])),
              "network_occupancy_ratio": float(rng.choice([0.0, rng.uniform(0.0, 1.0)], p=[0.1, 0.9]))}
             for _ in range(int(rng.integers(3, 30)))] for g in range(9)]
    sums = _ResampledSums(gpus)
    for _ in range(50):
        picks = rng.integers(0, len(gpus), len(gpus))
        rows = [r for i in picks for r in gpus[i]]
        assert np.array_equal(sums.semi_slopes(picks), _semi_slopes(rows))
        assert sums.elasticity_stats(picks) == _elasticity_stats(rows)


def test_gpu_parts_without_two_solvable_resamples_fall_back_to_the_ols_errors():
    """One GPU of five has hours of different energy: a resample without it cannot be solved, and a
    bootstrap left with fewer than two draws gave NaN errors; the within-model OLS errors stand in."""
    import numpy as np

    from joulehouse.models.joint_sensitivity import gpu_parts

    rng = np.random.default_rng(3)
    rows = []
    for g in range(5):
        for h in range(6):
            activity = float(rng.uniform(0.2, 0.9)) if g == 0 else 0.5
            rows.append({"gpu_uuid": f"GPU-{g}", "gpu_model": "H100", "energy_kwh": 0.2 + 0.4 * activity,
                         "activity_ratio": activity, "network_occupancy_ratio": 0.1 + 0.2 * activity})
    point, se, draws, method, n_gpus, _ = gpu_parts(rows, reps=1, seed=0)
    assert method == "ols-fe" and n_gpus == 5
    assert np.all(np.isfinite(se[:2])) and draws.shape[1] == 2
    assert point[0] < 0 < point[1]  # more energy, less idle time and more bandwidth


def test_a_job_row_shipped_twice_counts_once_in_the_hours_class(tmp_path):
    """35 min of a latency-sensitive job and a 25 min background row shipped twice: counted twice
    (50 min) the background class held the hour."""
    import datetime as dt

    import pyarrow as pa

    from joulehouse.collectors.writer import write_dataset
    from joulehouse.models.joint_sensitivity import read_gpu_hours
    from joulehouse.settings import WarehouseSettings
    from joulehouse.warehouse.build import build_day
    from joulehouse.warehouse.db import connect

    day, start = dt.date(2026, 1, 2), dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    lake = tmp_path / "lake"
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist([dict(
        sampled_at=start + dt.timedelta(seconds=s), host="node-01", gpu_index=0, gpu_uuid="GPU-0",
        gpu_model="NVIDIA H100 80GB HBM3", power_w=300.0, energy_mj_total=s * 300_000, power_limit_w=700.0,
        util_gpu_pct=80.0, pcie_tx_bytes_per_s=5e9, pcie_rx_bytes_per_s=1e9, source="nvml") for s in range(0, 3601, 10)]))
    job = lambda job_id, a, b, cls: dict(job_id=job_id, host="node-01", gpu_uuid="GPU-0", workload_class=cls,  # noqa: E731
                                         started_at=start + dt.timedelta(minutes=a), ended_at=start + dt.timedelta(minutes=b),
                                         team="t", user="u", stage="training")
    background = job("bg", 35, 60, "background")
    write_dataset(lake, "jobs", pa.Table.from_pylist([job("serve", 0, 35, "latency-sensitive"), background, background]))
    con = connect(tmp_path / "w.duckdb", lake)
    build_day(con, day, WarehouseSettings(), now=start + dt.timedelta(days=8))
    link_bandwidth_day(con, day)
    assert [r["workload_class"] for r in read_gpu_hours(con, day) if r["hour_at"] == start] == ["latency-sensitive"]


def _site_hours(missing_temp_hours=()):
    """24 site-hours where PUE = 1.05 + 0.008 x outdoor C, and IT load does not matter (the true
    d PUE / d ln load is 0) but peaks with the afternoon's heat, as at a real site."""
    import datetime as dt

    import duckdb
    import numpy as np

    day = dt.date(2026, 7, 14)
    start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    rng = np.random.default_rng(0)
    h = np.arange(24)
    temp = 20 + 8 * np.sin((h - 9) / 24 * 2 * np.pi) + rng.normal(0, 0.5, 24)
    load_kw = 400 + 150 * np.sin((h - 9) / 24 * 2 * np.pi) + rng.normal(0, 20, 24)
    pue = 1.05 + 0.008 * temp + rng.normal(0, 0.002, 24)
    con = duckdb.connect()
    con.execute("CREATE TABLE fct_pue_hourly (day DATE, site VARCHAR, hour_at TIMESTAMPTZ, pue DOUBLE, "
                "it_energy_kwh DOUBLE, coverage_ratio DOUBLE)")
    con.executemany("INSERT INTO fct_pue_hourly VALUES (?, 's', ?, ?, ?, 1.0)",
                    [(day, start + dt.timedelta(hours=int(i)), float(pue[i]), float(load_kw[i])) for i in h])
    con.execute("CREATE TABLE raw_facility_samples (site VARCHAR, sampled_at TIMESTAMPTZ, date DATE, "
                "outdoor_temp_c DOUBLE)")
    con.executemany("INSERT INTO raw_facility_samples VALUES ('s', ?, ?, ?)",
                    [(start + dt.timedelta(hours=int(i), minutes=m), day, float(temp[i]))
                     for i in h if i not in missing_temp_hours for m in (0, 30)])
    return con, day, [start + dt.timedelta(hours=int(i)) for i in h]


def test_the_pue_part_holds_outdoor_temperature_fixed_even_with_an_hour_unread():
    """One hour without an outdoor reading (or a window of 4 hours) dropped the temperature from
    the regression, and its swing went into the slope: 0.147 +- 0.013 for a true 0."""
    from joulehouse.models.joint_sensitivity import site_pue_parts

    con, day, hours = _site_hours()
    every = site_pue_parts(con, day)["s"]
    con, day, hours = _site_hours(missing_temp_hours=(3,))
    one_unread = site_pue_parts(con, day)["s"]
    for part in (every, one_unread):
        assert abs(part.value) < 1.96 * part.std_error + 0.005, part  # the truth, 0, inside the interval
    assert one_unread.n_obs == 23
    assert "s" not in site_pue_parts(con, day, hours[8:12]), "4 hours cannot hold the temperature fixed"
    assert abs(site_pue_parts(con, day, hours[8:13])["s"].value) < 0.05
