"""The 95% intervals of S's parts cover the truth 95% of the time, small windows and sites too.
A fixed quantile made them too narrow where the data are few: t(30) for every hourly window (a
window of 8 GPU-hours of one model has 6 degrees of freedom: 91% coverage), the normal's for the
PUE part of a site read a few hours (2 degrees of freedom: about 78%). Truths are drawn here, so
whether each interval covers its truth is known."""

from __future__ import annotations

import datetime as dt

import duckdb
import numpy as np

from joulehouse.models.joint_sensitivity import Weights, joint_sensitivities, sliding_window_day

DAY = dt.date(2026, 3, 2)
IDLE_SLOPE, BW_SLOPE = -0.3, 0.2  # d(1 - util) / d lnE and d occupancy / d lnE of every drawn GPU-hour
PUE_SLOPE = 0.05  # d PUE / d ln(IT load) of the drawn site


def _windows(rng: np.random.Generator, hours: int, per_hour: int) -> list[dict]:
    """`per_hour` GPU-hours of one model in each hour, each part linear in ln E plus noise."""
    rows = []
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    for h in range(hours):
        ln_e = rng.normal(-1.0, 0.4, per_hour)
        idle = 0.5 + IDLE_SLOPE * ln_e + rng.normal(0, 0.05, per_hour)
        occupancy = 0.4 + BW_SLOPE * ln_e + rng.normal(0, 0.05, per_hour)
        rows += [{"hour_at": start + dt.timedelta(hours=h), "gpu_model": "H100", "gpu_uuid": f"GPU-{i}",
                  "site": "site-a", "workload_class": None, "energy_kwh": float(np.exp(ln_e[i])),
                  "activity_ratio": float(1 - idle[i]), "network_occupancy_ratio": float(occupancy[i])}
                 for i in range(per_hour)]
    return rows


def test_hourly_windows_of_few_gpu_hours_cover_their_truth_95_percent_of_the_time():
    con = duckdb.connect()
    con.execute("CREATE TABLE fct_link_bandwidth_hourly (day DATE)")  # S needs it to exist; no PUE here
    rng = np.random.default_rng(11)
    covered, total = 0, 0
    for _ in range(60):  # 60 days of 24 one-hour windows, each of 8 GPU-hours: 2,880 intervals
        out = sliding_window_day(con, DAY, Weights(0.5, 0.5), 1, gpu_hours=_windows(rng, 24, 8))
        for row in out:
            truth = {"joint_part_idle_share": IDLE_SLOPE, "joint_part_network_bandwidth": BW_SLOPE}[row["quantity"]]
            covered += row["ci_low"] <= truth <= row["ci_high"]
            total += 1
    assert total == 60 * 24 * 2
    assert 0.935 <= covered / total <= 0.965, f"{covered / total:.3f} of the intervals hold the truth"


def test_the_pue_part_of_a_site_read_a_few_hours_covers_its_truth_95_percent_of_the_time():
    """Five hours, outdoor temperature held fixed: 2 degrees of freedom left for the PUE part's error,
    in the day's row (fct_sensitivity_daily) and in the hourly window that holds the five hours."""
    con = duckdb.connect()
    con.execute("CREATE TABLE fct_link_bandwidth_hourly (day DATE);"
                "CREATE TABLE fct_pue_hourly (site VARCHAR, day DATE, hour_at TIMESTAMPTZ, pue DOUBLE,"
                "                             it_energy_kwh DOUBLE, coverage_ratio DOUBLE);"
                "CREATE TABLE raw_facility_samples (site VARCHAR, date DATE, sampled_at TIMESTAMPTZ, outdoor_temp_c DOUBLE)")
    rng = np.random.default_rng(5)
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    covered = {"daily": 0, "hourly": 0}
    trials = 300
    for _ in range(trials):
        load_kw, outdoor_c = rng.uniform(400, 900, 5), rng.uniform(5, 25, 5)
        pue = 1.2 + PUE_SLOPE * np.log(load_kw) + 0.004 * outdoor_c + rng.normal(0, 0.01, 5)
        con.execute("DELETE FROM fct_pue_hourly; DELETE FROM raw_facility_samples")
        hours = [start + dt.timedelta(hours=h) for h in range(5)]
        con.executemany("INSERT INTO fct_pue_hourly VALUES ('site-a', ?, ?, ?, ?, 1.0)",
                        [[DAY, at, float(p), float(kw)] for at, p, kw in zip(hours, pue, load_kw)])
        con.executemany("INSERT INTO raw_facility_samples VALUES ('site-a', ?, ?, ?)",
                        [[DAY, at, float(c)] for at, c in zip(hours, outdoor_c)])
        gpu_hours = _windows(rng, 5, 8)
        daily = [s for s in joint_sensitivities(con, DAY, Weights(0.5, 0.5), bootstrap_reps=2, gpu_hours=gpu_hours)
                 if s.quantity == "joint_part_pue"]
        hourly = [r for r in sliding_window_day(con, DAY, Weights(0.5, 0.5), 5, gpu_hours=gpu_hours)
                  if r["quantity"] == "joint_part_pue"]
        assert len(daily) == 1 and len(hourly) == 1, "one site-day, and only the window of all five hours"
        covered["daily"] += daily[0].ci_low <= PUE_SLOPE <= daily[0].ci_high
        covered["hourly"] += hourly[0]["ci_low"] <= PUE_SLOPE <= hourly[0]["ci_high"]
    for where, n in covered.items():
        assert 0.91 <= n / trials <= 0.985, f"{where}: {n / trials:.3f} of the intervals hold the truth"
