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


# An activity function's value for a minute the GPU was read (power and all) without its activity.
UNREPORTED = "unreported"
# The warehouse bridges a reading with its energy counter up to [warehouse] max_counter_gap_s (900 s).
COUNTER_START_MJ = 10**9


def _samples(con, gpus, *, every_s=60, offsets_s=None, counter=True):
    """gpus: {uuid: (activity function of minute, busy power W, idle power W)}; a reading every
    `every_s` from the GPU's offset in `offsets_s` (s after midnight, default 0), none in a minute
    whose activity is None (the GPU unread), one without activity where it is UNREPORTED (at busy
    power). Each reading has the interval_s the warehouse gives it: the time to the GPU's next
    reading (NULL for its last), and an energy counter that bridges it (`counter`; else power only)."""
    con.execute("CREATE OR REPLACE TABLE stg_gpu_samples (day DATE, host VARCHAR, gpu_uuid VARCHAR, gpu_model VARCHAR, "
                "sampled_at TIMESTAMPTZ, power_w FLOAT, sm_active_ratio FLOAT, util_gpu_pct FLOAT, "
                "energy_mj_total BIGINT, interval_s DOUBLE)")
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    rows = []
    for uuid, (act, busy_w, idle_w) in gpus.items():
        offset_s = (offsets_s or {}).get(uuid, 0)
        read = [(t, act(t // 60)) for t in range(offset_s, 86400, every_s) if act(t // 60) is not None]
        energy_mj = COUNTER_START_MJ
        for (t, a), following in zip(read, [*read[1:], None]):
            power_w = busy_w if a == UNREPORTED or a > 0.05 else idle_w
            interval_s = following[0] - t if following else None
            rows.append((DAY, "node-01", uuid, MODEL, start + dt.timedelta(seconds=t), power_w,
                         None if a == UNREPORTED else a, None, energy_mj if counter else None, interval_s))
            energy_mj += round(power_w * (interval_s or 0) * 1000)
    table = pa.Table.from_pylist([dict(zip(("day", "host", "gpu_uuid", "gpu_model", "sampled_at", "power_w",
                                            "sm_active_ratio", "util_gpu_pct", "energy_mj_total", "interval_s"), r))
                                  for r in rows])
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


def _consolidation(con):
    return {r[0]: r[1:] for r in con.execute("SELECT gpu_uuid, latency_risk, detail FROM fct_recommendation_extra "
                                             "WHERE kind = 'consolidation' ORDER BY 1").fetchall()}


def test_light_gpus_read_every_five_minutes_are_packed_by_their_summed_work():
    """Four GPUs read every 300 s at staggered instants (an imported `nvidia-smi -l 300` log), each
    at 50% activity from 00:00 to 12:00 and idle after (a mean of 25%: light). Together they do 2.0
    GPUs of work all morning: ceil(2.0 / 0.8) = 3 GPUs, one parked. By the readings inside each
    minute, a minute held one GPU's reading and the others' counted as idle: the sum peaked at 0.5,
    the work went onto 1 GPU and 3 were parked at 'low' risk, though one GPU would queue all morning."""
    con = duckdb.connect()
    half_day = {f"GPU-{name}": (lambda m: 0.5 if m < 720 else 0.0, 120.0, 50.0) for name in "abcd"}
    _samples(con, half_day, every_s=300, offsets_s={"GPU-a": 0, "GPU-b": 75, "GPU-c": 150, "GPU-d": 225})
    recommend_placement(con, DAY)
    freed = _consolidation(con)
    assert set(freed) == {"GPU-d"}, "three of the four keep the work"
    (risk, detail), = freed.values()
    assert risk == "low"
    assert "peaks (p99) at 2.00 GPUs" in detail and "fits on 3 at 80%" in detail
    # every GPU's readings cover 00:03-23:55 (GPU-d's first at 00:03:45, GPU-a's last at 23:55 stands
    # for no time): the minutes 3..1434
    assert "over the 1432 minutes all 4 were read" in detail


def test_readings_stand_for_the_time_the_warehouse_bridged():
    """The same log without energy counters: the warehouse integrates power across at most
    [warehouse] max_gap_s (10 s by default), so a reading 300 s from the next stands for no time and
    no minute of the host is known: not packed. A site that bridges 300 s (max_gap_s = 300) packs it."""
    from joulehouse.warehouse.settings import WarehouseSettings

    con = duckdb.connect()
    half_day = {f"GPU-{name}": (lambda m: 0.5 if m < 720 else 0.0, 120.0, 50.0) for name in "abcd"}
    _samples(con, half_day, every_s=300, offsets_s={"GPU-a": 0, "GPU-b": 75, "GPU-c": 150, "GPU-d": 225}, counter=False)
    recommend_placement(con, DAY)
    assert _consolidation(con) == {}
    recommend_placement(con, DAY, warehouse=WarehouseSettings(max_gap_s=300.0))
    assert set(_consolidation(con)) == {"GPU-d"}


def test_a_gpu_read_without_its_activity_is_not_taken_as_idle():
    """GPU-b drew its busy 120 W from 00:00 to 04:00 with no activity reported. Read as idle, the
    host's work was GPU-a's alone and GPU-b was parked for idle draw it did not have; with those
    minutes unknown, the minutes both GPUs were read (20 h) are too few to judge the host by."""
    con = duckdb.connect()
    _samples(con, {"GPU-a": (lambda m: 0.2 if m % 10 else 0.0, 120.0, 50.0),
                   "GPU-b": (lambda m: UNREPORTED if m < 240 else 0.0, 120.0, 50.0)})
    recommend_placement(con, DAY)
    assert _consolidation(con) == {}


def test_the_p99_is_taken_over_the_minutes_every_light_gpu_was_read():
    """GPU-b's first 100 minute rows have a NULL activity (read without it): unknown, so not among
    the minutes the p99 is taken over, and the row says how many those are (before, they counted as
    idle minutes and the row did not say the p99 stood on fewer than the day's)."""
    from joulehouse.models.placement import consolidation

    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    gpus = [{"host": "node-01", "gpu_uuid": uuid, "mean_activity_ratio": mean, "covered_hours": 24.0,
             "idle_power_w": 50.0, "busy_hours": 12.0} for uuid, mean in (("GPU-a", 0.2), ("GPU-b", 0.1))]
    minutes = [{"gpu_uuid": "GPU-a", "minute_at": start + dt.timedelta(minutes=m), "activity_ratio": 0.2}
               for m in range(1440)]
    minutes += [{"gpu_uuid": "GPU-b", "minute_at": start + dt.timedelta(minutes=m),
                 "activity_ratio": None if m < 100 else 0.1} for m in range(1440)]
    (row,) = consolidation(gpus, minutes)
    assert row["gpu_uuid"] == "GPU-b"
    assert "at 0.30 GPUs of activity over the 1340 minutes all 2 were read" in row["detail"]


def test_samples_without_the_time_each_reading_stands_for_are_refused_by_name():
    """A hand-made relation without interval_s: how long a reading stands for is unknown, and
    packing it by the readings inside each minute is what summed unread minutes as idle."""
    con = duckdb.connect()
    _three_light_gpus(con)
    con.execute("ALTER TABLE stg_gpu_samples DROP COLUMN interval_s")
    with pytest.raises(ValueError, match="stg_gpu_samples has no interval_s"):
        recommend_placement(con, DAY)
