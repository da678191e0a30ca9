"""Consolidation and thermal placement on hand-made days whose saving can be worked out by hand."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from joulehouse.models.placement import DEFAULT_TEMP_W_PER_C, recommend_placement, thermal_placement

DAY = dt.date(2026, 3, 2)
MODEL = "NVIDIA A100-SXM4-80GB"


def _samples(con, gpus):
    """gpus: {uuid: (activity function of minute, busy power W, idle power W)}; one sample a minute,
    none in a minute whose activity is None (the GPU unread)."""
    con.execute("CREATE OR REPLACE TABLE stg_gpu_samples (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR, "
                "sampled_at TIMESTAMPTZ, power_w FLOAT, sm_active_ratio FLOAT, util_gpu_pct FLOAT)")
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    rows = []
    for uuid, (act, busy_w, idle_w) in gpus.items():
        for m in range(1440):
            a = act(m)
            if a is None:
                continue
            rows.append((DAY, "node-01", uuid, MODEL, start + dt.timedelta(minutes=m), busy_w if a > 0.05 else idle_w, a, None))
    table = pa.Table.from_pylist([dict(zip(("day", "host", "gpu_uuid", "gpu_model", "sampled_at", "power_w",
                                            "sm_active_ratio", "util_gpu_pct"), r)) for r in rows])
    con.register("new_rows", table)
    con.execute("INSERT INTO stg_gpu_samples SELECT * FROM new_rows")


def _extra(con, kind):
    return {r[0]: r[1:] for r in con.execute("SELECT gpu_uuid, expected_saving_kwh_per_day, detail FROM fct_recommendation_extra "
                                             "WHERE kind = ? ORDER BY 1", [kind]).fetchall()}


def test_light_gpus_are_consolidated_and_each_freed_gpu_saves_its_idle_day():
    con = duckdb.connect()
    _samples(con, {
        "GPU-busy": (lambda m: 0.9, 350.0, 55.0),
        # Three light GPUs, busy at 0.2 in different hours: together they never exceed 0.6 of one GPU.
        "GPU-a": (lambda m: 0.2 if m < 600 else 0.0, 120.0, 50.0),
        "GPU-b": (lambda m: 0.2 if 300 <= m < 900 else 0.0, 120.0, 52.0),
        "GPU-c": (lambda m: 0.2 if m >= 800 else 0.0, 120.0, 54.0),
    })
    assert recommend_placement(con, DAY) == 2
    freed = _extra(con, "consolidation")
    assert set(freed) == {"GPU-a", "GPU-b"}  # the least busy two; GPU-c (busiest of the light ones) keeps the work
    assert freed["GPU-a"][0] == pytest.approx(50.0 * 24 / 1000) and freed["GPU-b"][0] == pytest.approx(52.0 * 24 / 1000)
    assert "GPU-c" in freed["GPU-a"][1]
    assert recommend_placement(con, DAY) == 2  # a re-run replaces the day


def test_light_gpus_whose_work_overlaps_too_much_are_left_alone():
    con = duckdb.connect()
    _samples(con, {"GPU-a": (lambda m: 0.25 if m % 2 else 0.0, 120.0, 50.0),
                   "GPU-b": (lambda m: 0.25 if m % 2 else 0.0, 120.0, 50.0),
                   "GPU-c": (lambda m: 0.25 if m % 2 else 0.0, 120.0, 50.0),
                   "GPU-d": (lambda m: 0.25 if m % 2 else 0.0, 120.0, 50.0)})
    recommend_placement(con, DAY)
    # Together they reach 1.0 of a GPU every other minute: two are needed at 80%, so two are freed, not three.
    assert len(_extra(con, "consolidation")) == 2


def test_work_that_needs_more_gpus_than_the_host_has_frees_none():
    """An 8-GPU job at full activity for an hour: the work needs 10 GPUs at 80%. The free list's
    slice went negative and parked six of the eight, at 'low' risk."""
    con = duckdb.connect()
    _samples(con, {f"GPU-{i}": (lambda m: 1.0 if m < 60 else 0.0, 400.0, 60.0) for i in range(8)})
    recommend_placement(con, DAY)
    assert _extra(con, "consolidation") == {}


def test_idle_gpus_tied_at_zero_name_a_gpu_that_stays_on_as_where_the_work_goes():
    """Two sorts split the tie: GPU-0 was both parked and named as the GPU the work moves to."""
    con = duckdb.connect()
    _samples(con, {f"GPU-{i}": (lambda m: 0.0, 60.0, 60.0) for i in range(4)})
    recommend_placement(con, DAY)
    freed = _extra(con, "consolidation")
    assert len(freed) == 3
    (kept,) = {f"GPU-{i}" for i in range(4)} - set(freed)
    assert all(f"to {kept} and park it" in detail for _, detail in freed.values())


def test_a_gpu_read_two_hours_is_not_packed_as_idle_for_the_day():
    """GPU-gappy's collector was down after 02:00. Its unread 22 h counted as idle minutes: it was
    packed and parked with 24 h of idle draw saved (1.2 kWh/day), though nothing says it was idle."""
    con = duckdb.connect()
    _samples(con, {"GPU-a": (lambda m: 0.25 if m < 720 else 0.0, 120.0, 50.0),
                   "GPU-b": (lambda m: 0.25 if m >= 720 else 0.0, 120.0, 52.0),
                   "GPU-gappy": (lambda m: 0.0 if m < 120 else None, 120.0, 50.0)})
    recommend_placement(con, DAY)
    freed = _extra(con, "consolidation")
    assert "GPU-gappy" not in freed and "GPU-gappy" not in " ".join(d for _, d in freed.values())
    assert set(freed) == {"GPU-b"}, "the two GPUs read all day still share one"
    assert "2 GPUs on node-01" in freed["GPU-b"][1]


def test_thermal_placement_leaves_out_the_gpus_consolidation_frees():
    """Work given to a GPU the plan parks is work it will not run; its saving was added to the
    parking's (3.02 kWh/day on a host whose three GPUs could save 2.88)."""
    con = duckdb.connect()
    _samples(con, {"GPU-a": (lambda m: 0.5 if m < 144 else 0.0, 400.0, 60.0),
                   "GPU-b": (lambda m: 0.5 if 200 <= m < 488 else 0.0, 400.0, 60.0),
                   "GPU-c": (lambda m: 0.5 if 600 <= m < 1176 else 0.0, 400.0, 60.0)})
    con.execute("CREATE TABLE fct_thermal_gpu (day DATE, gpu_uuid VARCHAR, theta_c_per_w DOUBLE)")
    con.execute("INSERT INTO fct_thermal_gpu VALUES (?, 'GPU-a', 0.05), (?, 'GPU-b', 0.10), (?, 'GPU-c', 0.15)", [DAY] * 3)
    recommend_placement(con, DAY)
    assert set(_extra(con, "consolidation")) == {"GPU-a", "GPU-b"}
    assert _extra(con, "thermal_placement") == {}  # one GPU keeps the work: nothing to place


def test_the_hottest_work_goes_to_the_best_cooled_gpu():
    con = duckdb.connect()
    _samples(con, {"GPU-hot-slot": (lambda m: 0.9, 380.0, 55.0), "GPU-cool-slot": (lambda m: 0.3 if m < 720 else 0.0, 150.0, 55.0)})
    con.execute("CREATE TABLE fct_thermal_gpu (day DATE, gpu_uuid VARCHAR, theta_c_per_w DOUBLE)")
    con.execute("INSERT INTO fct_thermal_gpu VALUES (?, 'GPU-hot-slot', 0.14), (?, 'GPU-cool-slot', 0.10)", [DAY, DAY])
    recommend_placement(con, DAY)
    moves = _extra(con, "thermal_placement")
    heat_hot, heat_cool = 380.0 * 24, 150.0 * 12  # W h of work per day (busy power x busy hours)
    expected_total = DEFAULT_TEMP_W_PER_C * (0.14 - 0.10) * (heat_hot - heat_cool) / 1000
    assert set(moves) == {"GPU-hot-slot", "GPU-cool-slot"}
    assert sum(m[0] for m in moves.values()) == pytest.approx(expected_total, rel=0.01)
    assert "GPU-hot-slot" in moves["GPU-cool-slot"][1]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0.05, 0.2), st.floats(60, 700), st.floats(0.5, 24)), min_size=2, max_size=8))
def test_thermal_placement_never_costs_energy(gpus):
    rows = [{"host": "h", "gpu_model": MODEL, "gpu_uuid": f"g{i}", "busy_power_w": p, "busy_hours": h}
            for i, (_, p, h) in enumerate(gpus)]
    theta = {f"g{i}": t for i, (t, _, _) in enumerate(gpus)}
    assert sum(r["expected_saving_kwh_per_day"] for r in thermal_placement(rows, theta, {})) >= -1e-9


def _three_light_gpus(con):
    _samples(con, {
        "GPU-a": (lambda m: 0.2 if m < 600 else 0.0, 120.0, 50.0),
        "GPU-b": (lambda m: 0.2 if 300 <= m < 900 else 0.0, 120.0, 52.0),
        "GPU-c": (lambda m: 0.2 if m >= 800 else 0.0, 120.0, 54.0),
    })


def test_without_parking_consolidation_saves_nothing_and_says_why():
    con = duckdb.connect()
    _three_light_gpus(con)
    recommend_placement(con, DAY, parking="none")
    freed = _extra(con, "consolidation")
    assert set(freed) == {"GPU-a", "GPU-b"}
    assert all(saving == 0.0 for saving, _ in freed.values())
    assert "nothing parks a freed GPU here" in freed["GPU-a"][1]


def test_packing_that_never_queues_is_low_risk():
    con = duckdb.connect()
    _three_light_gpus(con)
    recommend_placement(con, DAY)
    risks = dict(con.execute("SELECT gpu_uuid, latency_risk FROM fct_recommendation_extra WHERE kind = 'consolidation'").fetchall())
    assert set(risks.values()) == {"low"}, "0.2 + 0.2 of one GPU never queues"


def test_latency_risk_grades_the_minutes_that_would_queue():
    import numpy as np

    from joulehouse.models.placement import latency_risk

    calm = np.full(1440, 0.5)
    assert latency_risk(calm, 1, 0.8) == ("low", 0.0)
    spiky = calm.copy()
    spiky[:10] = 1.2  # 10 minutes above one GPU
    assert latency_risk(spiky, 1, 0.8) == ("medium", pytest.approx(10 / 1440))
    spiky[:60] = 1.2
    assert latency_risk(spiky, 1, 0.8)[0] == "high"
