"""The report's joint sensitivity block, on hand-written rows: plain words, the typical values, the windows."""

from __future__ import annotations

import datetime as dt
import html

import duckdb
import pytest
from report_fixtures import DAY, build_analysis, build_day

from joulehouse.reports.page.render import render_report

TYPICAL = {"joint_part_pue": 0.18, "joint_part_idle_share": -0.62, "joint_part_network_bandwidth": 0.41}


@pytest.fixture()
def joint_day():
    con = duckdb.connect()
    build_day(con)
    build_analysis(con)
    for column, kind in (("weight_utilization", "DOUBLE"), ("weight_network_bandwidth", "DOUBLE"),
                         ("typical_value", "DOUBLE"), ("typical_workload", "VARCHAR")):
        con.execute(f"ALTER TABLE fct_sensitivity_daily ADD COLUMN {column} {kind}")
    rows = []
    for quantity, est, lo, hi in (("joint_part_pue", 0.01, -0.02, 0.04), ("joint_part_idle_share", -0.32, -0.38, -0.26),
                                  ("joint_part_network_bandwidth", 0.41, 0.30, 0.52)):
        rows.append((DAY, quantity, "throughput", est, lo, hi, 0.02, 270, 15, "ols-fe+gpu-bootstrap", "per ln power",
                     None, None, TYPICAL[quantity], "training-dense"))
    s = 0.01 + 0.5 * -0.32 + 0.5 * 0.41
    rows.append((DAY, "joint_sensitivity_s", "throughput", s, s - 0.04, s + 0.04, 0.02, 270, 15, "pue-ols", "S",
                 0.5, 0.5, 0.18 + 0.5 * -0.62 + 0.5 * 0.41, "training-dense"))
    con.executemany("INSERT INTO fct_sensitivity_daily VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
    con.execute("""CREATE TABLE fct_sensitivity_hourly (day DATE, hour_at TIMESTAMPTZ, window_hours INTEGER, scope VARCHAR,
        quantity VARCHAR, estimate DOUBLE, ci_low DOUBLE, ci_high DOUBLE, n_obs BIGINT, weight_utilization DOUBLE,
        weight_network_bandwidth DOUBLE)""")
    start = dt.datetime.combine(DAY, dt.time(), tzinfo=dt.timezone.utc)
    con.executemany("INSERT INTO fct_sensitivity_hourly VALUES (?,?,?,?,?,?,?,?,?,?,?)", [
        (DAY, start + dt.timedelta(hours=h), min(h + 1, 6), "throughput", "joint_sensitivity_s", 0.05 + 0.001 * h,
         0.0, 0.1 + 0.001 * h, 40, 0.5, 0.5) for h in range(24)])
    yield con
    con.close()


def test_the_block_says_where_each_part_stands_against_the_typical_value(joint_day, tmp_path):
    text = html.unescape(render_report(joint_day, DAY, tmp_path / "r.html").read_text())
    assert "Joint sensitivity of PUE, utilisation and network bandwidth" in text
    assert "training-dense work (compared with the throughput class) 0.18, −0.62, 0.41" in text
    # the interval decides: the idle-share part (-0.38..-0.26) lies above -0.62, the bandwidth part covers 0.41
    assert "idle-share part -0.320 (-0.380 to -0.260), above the typical -0.620" in text
    assert "bandwidth part 0.410 (0.300 to 0.520), in line with the typical 0.410" in text
    assert "PUE part 0.010 (-0.020 to 0.040), below the typical 0.180" in text
    assert "S = 0.055 (0.015 to 0.095), in line with the typical 0.075" in text  # 0.075 lies inside and "w1 = 0.50, w2 = 0.50" in text
    for title in ("Joint sensitivity S and its parts, per workload class, against the typical values",
                  "S over the sliding window ending at each hour (UTC)"):
        assert f'"text":"{title}"' in text


def test_without_joint_rows_the_block_says_what_it_needs(tmp_path):
    con = duckdb.connect()
    build_day(con)
    build_analysis(con)
    text = html.unescape(render_report(con, DAY, tmp_path / "r.html").read_text())
    assert "no joint sensitivity" in text and "fct_link_bandwidth_hourly" in text
    assert '"text":"Sensitivities with 95% confidence intervals"' in text, "the other sensitivities stay"
