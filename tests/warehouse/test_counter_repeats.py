"""A counter read again before it moved: Prometheus scraping dcgm-exporter faster than the exporter
collects (the Helm chart's 15 s scrape, the exporter's 30 s default), or NVML polled faster than the
driver updates its counter. Each reading is the counter (and power) as last collected, so values
repeat, then jump. Before, each repeat was a counter interval of 0 J and the jump after it failed
the plausible maximum: a GPU at 600 W read as 0 kWh with full coverage, and beat a correct NVML
stream of the same GPU."""

from __future__ import annotations

import datetime as dt
import math
import random

import pytest
from hypothesis import given, settings, strategies as st
from warehouse_lakes import DAY, NOW, gpu_rows, hourly, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

LIMIT_W = 700.0


def held_readings(power_w: float, collect_s: float, scrape_s: float, phase_s: float = 0.3,
                  jitter_s=lambda k: 0.0, hours: int = 1) -> list[dict]:
    """Readings at each scrape of an exporter that collects every `collect_s` seconds: the counter
    (mJ, from 1e9 mJ) and power of its last collection. True draw: `power_w` all the time."""
    times = [phase_s + k * scrape_s + jitter_s(k) for k in range(int(hours * 3600 / scrape_s) + 2)]

    def collected_at(t: float) -> float:
        return math.floor(t / collect_s) * collect_s

    return gpu_rows(times, power_w, counter_mj=lambda t: 10**9 + round(power_w * collected_at(t) * 1000),
                    limit_w=LIMIT_W, source="dcgm")


@pytest.mark.parametrize(("power_w", "collect_s", "scrape_s"), [
    (600.0, 30, 15), (300.0, 30, 15), (600.0, 30, 1), (690.0, 1.05, 1), (600.0, 0.1, 0.01)])
def test_a_counter_read_again_before_it_moved_still_gives_the_hours_energy(lake, warehouse, power_w, collect_s,
                                                                            scrape_s):
    hours = 1 if scrape_s >= 1 else 0.1
    write(lake, held_readings(power_w, collect_s, scrape_s, hours=hours))
    r = hourly(warehouse())[0]
    covered_s = r["coverage_ratio"] * 3600
    assert r["energy_source"] == "counter" and covered_s == pytest.approx(3600 * hours, abs=collect_s + scrape_s)
    assert r["energy_j"] / covered_s == pytest.approx(power_w, rel=0.02)


def test_a_held_dcgm_stream_does_not_beat_a_correct_nvml_stream_with_a_wrong_figure(lake, warehouse):
    write(lake, held_readings(300.0, 30, 1) + gpu_rows(range(0, 3601), 300.0, limit_w=LIMIT_W, source="nvml"))
    r = hourly(warehouse())[0]
    assert r["n_sources"] == 2
    assert r["energy_j"] == pytest.approx(300.0 * 3600, rel=0.01)


@settings(max_examples=15, deadline=None)
@given(power_w=st.floats(100, 690), phase_s=st.floats(0, 0.99), seed=st.integers(0, 2**16))
def test_scrapes_jittering_around_the_collection_lose_nothing(tmp_path_factory, power_w, phase_s, seed):
    """The exporter collects every second; the 1 s scrape lands near a collection, +-50 ms: some
    scrapes catch the same collection twice, others skip one and catch two at once."""
    rng = random.Random(seed)
    offsets = [rng.uniform(-0.05, 0.05) for _ in range(3700)]
    root = tmp_path_factory.mktemp("jitter")
    write(root / "lake", held_readings(power_w, 1.0, 1.0, phase_s=phase_s, jitter_s=lambda k: offsets[k]))
    con = connect(root / "warehouse.duckdb", root / "lake")
    try:
        build_day(con, DAY, WarehouseSettings(), now=NOW)
        r = hourly(con)[0]
    finally:
        con.close()
    assert r["coverage_ratio"] == pytest.approx(1.0, abs=2 / 3600) and r["energy_source"] == "counter"
    assert r["energy_j"] / (r["coverage_ratio"] * 3600) == pytest.approx(power_w, rel=0.01)


def test_a_driver_reload_inside_a_repeating_stream_loses_at_most_one_collection(lake, warehouse):
    """The counter restarts from 0 at 00:30 (a driver reload) while Prometheus scrapes twice per
    collection: the runs before and after the reload are each one counter interval, and the
    reload's interval counts the energy since the reload (a lower bound)."""
    rows = held_readings(300.0, 30, 15)
    for r in rows:
        t = (r["sampled_at"] - rows[0]["sampled_at"]).total_seconds() + 0.3
        if t >= 1800:
            r["energy_mj_total"] -= 10**9 + round(300.0 * 1800 * 1000)
    write(lake, rows)
    r = hourly(warehouse())[0]
    assert r["energy_source"] == "counter"
    read_s = 3600 - 0.3  # the first reading is at 00:00:00.3
    assert 300.0 * (read_s - 30) * (1 - 1e-9) <= r["energy_j"] <= 300.0 * read_s * (1 + 1e-9)


def _held_with_gaps(power_w: float, missing: callable) -> list[dict]:
    """Scrapes every 10 s of a counter collected every 30 s, from 01:00 for an hour; `missing(t)`:
    the scrape lacks the counter series (power only)."""
    times = range(3600, 7201, 10)
    counter = lambda t: None if missing(t) else 10**12 + round((t - t % 30) * power_w * 1000)  # noqa: E731
    return gpu_rows(times, power_w, counter_mj=counter, limit_w=LIMIT_W, source="dcgm")


@pytest.mark.parametrize("missing", [
    lambda t: t == 3640,  # once, inside a run: the run spanned the power-counted interval too (+8%)
    lambda t: t % 30 == 10,  # every collection: X, NULL, X, Y hid the repeats and each move counted 30 s (+67%)
    # the scrape right after a collection: the next run's first value was collected 10 s before
    # it was read, and the power-counted stretch before it was counted again from the counter
    lambda t: t == 3630,
    lambda t: t % 300 == 30,  # once every 5 minutes (+0.3%)
], ids=["once", "every collection", "after a collection", "after every tenth collection"])
def test_a_scrape_without_the_counter_inside_its_repeats_counts_no_time_twice(lake, warehouse, missing):
    write(lake, _held_with_gaps(300.0, missing))
    r = hourly(warehouse())[1]
    assert r["coverage_ratio"] <= 1.0 and r["energy_j"] == pytest.approx(300.0 * 3600, rel=1e-9)


def test_a_counter_stuck_longer_than_a_counter_interval_is_not_counted_again_when_it_moves(lake, warehouse):
    """Stuck 1,000 s at an idle 20 W (longer than max_counter_gap_s): its repeats were integrated
    from power and the catch-up counted from the counter too (46 kJ for 26 kJ)."""
    def counter(t):
        stuck = 3700 <= t <= 4700
        return 10**12 + round((100 if stuck else t - 3600) * 20.0 * 1000)
    write(lake, gpu_rows(range(3600, 4901, 10), 20.0, counter_mj=counter, limit_w=LIMIT_W, source="dcgm"))
    assert hourly(warehouse())[1]["energy_j"] == pytest.approx(20.0 * 1300, rel=1e-9)


def _mixed_series(power_w: float | None, stale_every: int, stale_s: float = 1.5) -> list[dict]:
    """One GPU's counter read at 1 Hz from two series labelled alike (two exporters of one node
    behind one job label): every `stale_every`-th reading comes from the series that lags
    `stale_s` behind, so the counter steps back a little and then rises past where it was."""
    def counter(t):
        lag_s = stale_s if round(t) % stale_every == 1 else 0.0  # the hour's first and last readings are on time
        return 10**12 + round((t - lag_s) * 300.0 * 1000)
    return gpu_rows(range(3600, 7201), power_w, counter_mj=counter, limit_w=LIMIT_W, source="dcgm")


@pytest.mark.parametrize("stale_every", [2, 3, 60])
def test_a_counter_that_steps_back_and_rises_again_counts_its_dip_once(lake, warehouse, stale_every):
    """Each step back was read as a reset and the rise after it counted the dip again (+33% when
    every third reading lagged 1.5 s). A reading below what its stream already counted holds no new
    measurement: its intervals are counted from power, the rest from the counter."""
    write(lake, _mixed_series(300.0, stale_every))
    r = hourly(warehouse())[1]
    assert r["coverage_ratio"] == pytest.approx(1.0)
    assert r["energy_j"] == pytest.approx(300.0 * 3600, rel=1e-9)


def test_a_counter_only_stream_that_steps_back_never_counts_the_dip_twice(lake, warehouse):
    """Without power too: the reading before a dip to the first one past it is one counter
    interval, so the whole hour is covered at the true rate (525 W was read for 300)."""
    write(lake, _mixed_series(None, 3))
    r = hourly(warehouse())[1]
    assert r["coverage_ratio"] == pytest.approx(1.0) and r["energy_source"] == "counter"
    assert r["energy_j"] == pytest.approx(300.0 * 3600, rel=1e-9)


@pytest.mark.parametrize("with_power", [True, False], ids=["with power", "counter only"])
@pytest.mark.parametrize(("at_s", "jump_mj"), [(3700, 10**9), (5400, -5 * 10**10)], ids=["one high reading",
                                                                                         "set back for good"])
def test_a_counter_that_does_not_come_back_soon_keeps_the_counter_for_the_rest_of_the_hour(lake, warehouse, with_power,
                                                                                            at_s, jump_mj):
    """One reading 1 MJ above the rest, or a counter set back 50 MJ for good: held below the most
    counted, every later reading lost its counter (counter only: 79.5 kJ of 1.08 MJ). Neither is a
    dip; the hour loses at most the intervals around the jump."""
    def counter(t):
        jump = (t == at_s) if jump_mj > 0 else (t >= at_s)
        return 10**12 + round(t * 300.0 * 1000) + (jump_mj if jump else 0)
    write(lake, gpu_rows(range(3600, 7201), 300.0 if with_power else None, counter_mj=counter, limit_w=LIMIT_W,
                         source="dcgm"))
    r = hourly(warehouse())[1]
    assert r["energy_source"] == "counter" and r["coverage_ratio"] >= 1 - 2 / 3600
    assert r["energy_j"] / (r["coverage_ratio"] * 3600) == pytest.approx(300.0, rel=1e-9)


def test_a_driver_reload_among_steps_back_still_starts_the_counter_again(lake, warehouse):
    """A fall to a value the time since the last reading can hold is a reload, not a step back:
    the readings after it are measured from the new start, not held below the old maximum."""
    rows = _mixed_series(300.0, 3)
    for row in rows:
        if row["sampled_at"] >= rows[0]["sampled_at"] + dt.timedelta(seconds=1800):
            row["energy_mj_total"] -= 10**12 + round(5400 * 300.0 * 1000) - 200_000
    write(lake, rows)
    assert hourly(warehouse())[1]["energy_j"] == pytest.approx(300.0 * 3600, rel=1e-3)


def test_a_counter_stepping_back_across_midnight_adds_up_over_the_two_days_builds(lake, warehouse):
    """The mixed series from 23:00 to 01:00, each day built on its own (each sees the other's
    readings only in its margin): the two hours around midnight hold the two hours' energy, once."""
    def counter(t):
        return 10**12 + round((t - (1.5 if round(t) % 3 == 1 else 0.0)) * 300.0 * 1000)
    write(lake, gpu_rows(range(-3600, 3601), 300.0, counter_mj=counter, limit_w=LIMIT_W, source="dcgm"))
    before = hourly(warehouse(day=DAY - dt.timedelta(days=1)), day=DAY - dt.timedelta(days=1))[23]
    after = hourly(warehouse())[0]
    assert before["energy_j"] + after["energy_j"] == pytest.approx(300.0 * 7200, rel=1e-9)
