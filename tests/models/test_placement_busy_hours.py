"""Thermal placement weighs each GPU's work as busy power x busy hours; busy hours count the hours
its readings cover (fct_gpu_coverage_daily), not the span from its first reading to its last
across a silence: the recommender's rule (models/sql/covered_hours.sql)."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest

from joulehouse.models.placement import DEFAULT_TEMP_W_PER_C, recommend_placement
from joulehouse.models.recommend_inputs import gpu_day_profiles

DAY = dt.date(2026, 3, 2)
MODEL = "NVIDIA A100-SXM4-80GB"
START = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
INTERVAL_S = 60.0
# GPU-gappy's collector was down 01:00-23:00: 120 readings, 2 h
GAPPY_MINUTES = [*range(0, 60), *range(1380, 1440)]


def _day(con, theta_gappy, theta_steady, *, coverage=True):
    """GPU-gappy (busy at 400 W on each of its 2 h of readings) and GPU-steady (busy at 300 W,
    read every minute of the day) on one host, each busy at activity 0.9: neither is consolidated."""
    rows = [{"day": DAY, "host": "node-01", "gpu_uuid": uuid, "gpu_model": MODEL,
             "sampled_at": START + dt.timedelta(minutes=m), "power_w": power_w, "sm_active_ratio": 0.9,
             "util_gpu_pct": None}
            for uuid, minutes, power_w in (("GPU-gappy", GAPPY_MINUTES, 400.0), ("GPU-steady", range(1440), 300.0))
            for m in minutes]
    con.register("new_rows", pa.Table.from_pylist(rows))
    # the recommender reads these too; unread here
    con.execute("CREATE TABLE stg_gpu_samples AS SELECT *, CAST(NULL AS DOUBLE) AS pcie_tx_bytes_per_s, "
                "CAST(NULL AS DOUBLE) AS pcie_rx_bytes_per_s, CAST(NULL AS FLOAT) AS temp_c, "
                "CAST(NULL AS FLOAT) AS power_limit_w, CAST(NULL AS BIGINT) AS clock_event_reasons, "
                "CAST(NULL AS INTEGER) AS sm_clock_mhz FROM new_rows")
    if coverage:
        # as the warehouse bridges them: each reading covers its minute
        con.execute("CREATE TABLE fct_gpu_coverage_daily AS "
                    "SELECT day, gpu_uuid, count(*) * ? AS covered_s FROM new_rows GROUP BY day, gpu_uuid", [INTERVAL_S])
    con.execute("CREATE TABLE fct_thermal_gpu (day DATE, gpu_uuid VARCHAR, theta_c_per_w DOUBLE)")
    con.execute("INSERT INTO fct_thermal_gpu VALUES (?, 'GPU-gappy', ?), (?, 'GPU-steady', ?)",
                [DAY, theta_gappy, DAY, theta_steady])


def _thermal(con):
    return {r[0]: r[1:] for r in con.execute("SELECT gpu_uuid, expected_saving_kwh_per_day, detail "
                                             "FROM fct_recommendation_extra WHERE kind = 'thermal_placement'").fetchall()}


def test_two_hours_of_work_are_not_moved_as_a_days_work():
    """By the span, GPU-gappy's 2 h at 400 W were 24 h (9.6 kWh of heat against GPU-steady's 7.2):
    its work was sent to the better-cooled GPU-steady, and GPU-steady's all-day work to the worse
    slot, for a promised 0.048 kWh/day. Its 0.8 kWh is the lighter work: it stays where it is."""
    con = duckdb.connect()
    _day(con, theta_gappy=0.14, theta_steady=0.10)
    recommend_placement(con, DAY)
    assert _thermal(con) == {}


def test_a_days_work_goes_to_the_better_cooled_gpu_read_two_hours():
    """GPU-gappy sits in the better-cooled slot: GPU-steady's day of work (300 W x 23.98 h) should
    move to it, and its own 2 h (400 W x 2 h) the other way. By the span they looked the other way
    round and nothing moved."""
    con = duckdb.connect()
    _day(con, theta_gappy=0.10, theta_steady=0.14)
    recommend_placement(con, DAY)
    moves = _thermal(con)
    assert set(moves) == {"GPU-gappy", "GPU-steady"}
    heat_steady_wh, heat_gappy_wh = 300.0 * 1439 / 60, 400.0 * 2
    expected_kwh = DEFAULT_TEMP_W_PER_C * (0.14 - 0.10) * (heat_steady_wh - heat_gappy_wh) / 1000
    assert sum(saving for saving, _ in moves.values()) == pytest.approx(expected_kwh)
    assert "(400 W for 2.0 h)" in moves["GPU-steady"][1]


def test_placement_and_the_recommender_count_the_same_busy_hours():
    con = duckdb.connect()
    _day(con, theta_gappy=0.10, theta_steady=0.14)
    recommend_placement(con, DAY)
    details = {u: d for u, (_, d) in _thermal(con).items()}
    profiles = {p["gpu_uuid"]: p for p in gpu_day_profiles(con, DAY, fits={})}
    assert profiles["GPU-gappy"]["busy_hours"] == pytest.approx(2.0)
    assert f"(400 W for {profiles['GPU-gappy']['busy_hours']:.1f} h)" in details["GPU-steady"]
    assert f"(300 W for {profiles['GPU-steady']['busy_hours']:.1f} h)" in details["GPU-gappy"]


def test_without_the_warehouses_coverage_the_span_of_the_readings_stands():
    con = duckdb.connect()
    _day(con, theta_gappy=0.14, theta_steady=0.10, coverage=False)
    recommend_placement(con, DAY)
    assert "(400 W for 24.0 h)" in _thermal(con)["GPU-steady"][1]
