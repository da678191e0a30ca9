"""fct_gpu_energy_hourly on hand-computable traces: every case checked to the joule."""

from __future__ import annotations

import datetime as dt

import pytest
from warehouse_lakes import DAY, at, gpu_rows, hourly, write

from joulehouse.settings import WarehouseSettings


@pytest.mark.slow
def test_constant_power_over_the_whole_day_gives_power_times_hour(lake, warehouse):
    # 1 Hz from the last second of the day before to the first second of the day after.
    write(lake, gpu_rows(range(-1, 86401), 250.0))
    rows = hourly(warehouse())
    assert sorted(rows) == list(range(24))
    for h, r in rows.items():
        assert r["energy_j"] == pytest.approx(250.0 * 3600, rel=1e-12), h
        assert r["coverage_ratio"] == pytest.approx(1.0)
        assert r["energy_source"] == "power_integral"


@pytest.mark.slow
def test_readings_stamped_off_the_second_stay_in_their_own_hour_and_day(lake, warehouse):
    """The NVML collector stamps to the microsecond: a reading at 23:59:59.7 belongs to hour 23 of
    its day, not to the next day's first hour (which made a 25th GPU-hour, charged embodied carbon
    and capital twice)."""
    write(lake, gpu_rows([t + 0.7 for t in range(-5, 86405)], 100.0))
    con = warehouse()
    rows = con.execute("SELECT hour_at, day, n_samples, energy_kwh * 3.6e6 FROM fct_gpu_energy_hourly "
                       "WHERE gpu_uuid = 'GPU-0' ORDER BY hour_at").fetchall()
    assert len(rows) == 24 and {r[0].date() for r in rows} == {DAY} and {r[1] for r in rows} == {DAY}
    assert [r[2] for r in rows] == [3600] * 24, "each hour holds its own 3,600 readings"
    assert sum(r[3] for r in rows) == pytest.approx(100.0 * 86400, rel=1e-12)


def test_energy_across_a_cap_just_applied_is_judged_against_the_limit_it_was_drawn_under(lake, warehouse):
    """Counter and power every 30 s (DCGM-like); at t=60 a 200 W cap replaces the 700 W limit while
    the board still draws 650 W. The reading at the switch is quarantined (650 W over 1.5 x 200 W);
    the counter across it (25.5 kJ in 60 s) is plausible under the old limit, not under the cap."""
    rows, energy_j = [], 0.0
    for t in range(3600, 3781, 30):
        rows += gpu_rows([t], 650.0 if t <= 3660 else 200.0, counter_mj=lambda _t, e=energy_j: int(e * 1000),
                         limit_w=700.0 if t < 3660 else 200.0, source="dcgm")
        energy_j += (650.0 if t < 3660 else 200.0) * 30
    write(lake, rows)
    r = hourly(warehouse())[1]
    assert r["energy_j"] == pytest.approx(650 * 60 + 200 * 120) and r["energy_source"] == "counter"
    assert r["coverage_ratio"] == pytest.approx(180 / 3600)


def test_reading_exactly_on_the_hour_splits_cleanly(lake, warehouse):
    write(lake, gpu_rows([3590, 3600, 3610], lambda t: {3590: 100.0, 3600: 200.0, 3610: 300.0}[t]))
    rows = hourly(warehouse())
    assert rows[0]["energy_j"] == pytest.approx((100 + 200) / 2 * 10)
    assert rows[1]["energy_j"] == pytest.approx((200 + 300) / 2 * 10)
    assert rows[1]["n_samples"] == 2 and rows[0]["n_samples"] == 1


def test_interval_across_the_hour_interpolates_power_at_the_boundary(lake, warehouse):
    write(lake, gpu_rows([3595, 3605], lambda t: 100.0 if t == 3595 else 200.0))
    rows = hourly(warehouse())
    assert rows[0]["energy_j"] == pytest.approx((100 + 150) / 2 * 5)
    assert rows[1]["energy_j"] == pytest.approx((150 + 200) / 2 * 5)
    assert rows[0]["coverage_ratio"] == pytest.approx(5 / 3600)


def test_counter_is_interpolated_at_the_boundary_and_preferred_to_power(lake, warehouse):
    # The power readings claim 1 W; the counter says 10 kJ in 10 s. The counter wins.
    write(lake, gpu_rows([3595, 3605], 1.0, counter_mj=lambda t: 0 if t == 3595 else 10_000_000))
    rows = hourly(warehouse())
    assert rows[0]["energy_j"] == pytest.approx(5000.0)
    assert rows[1]["energy_j"] == pytest.approx(5000.0)
    assert rows[0]["energy_source"] == rows[1]["energy_source"] == "counter"


def test_counter_reset_uses_power_for_the_reset_interval(lake, warehouse):
    # 100 W for 20 s; the driver reloads between t=10 and t=11 and the counter restarts.
    def counter(t):
        return int(t * 100_000) if t <= 10 else int((t - 10.5) * 100_000)

    write(lake, gpu_rows(range(0, 21), 100.0, counter_mj=counter))
    rows = hourly(warehouse())
    assert rows[0]["energy_j"] == pytest.approx(100.0 * 20)
    assert rows[0]["energy_source"] == "counter"


def test_counter_reset_without_power_takes_the_post_reset_value(lake, warehouse):
    def counter(t):
        return int(t * 100_000) if t <= 10 else int((t - 10.5) * 100_000)

    write(lake, gpu_rows(range(0, 21), None, counter_mj=counter))
    rows = hourly(warehouse())
    # 10 s before, 0.5 s after the reload seen in the reset interval, 9 s after: 19.5 s of 100 W.
    assert rows[0]["energy_j"] == pytest.approx(100.0 * 19.5)
    assert rows[0]["coverage_ratio"] == pytest.approx(20 / 3600)


def test_implausible_counter_jump_falls_back_to_power(lake, warehouse):
    # A jump of 1 GJ in one second is not a GPU: the power reading is used for that interval.
    def counter(t):
        return int(t * 100_000) + (10**12 if t >= 5 else 0)

    write(lake, gpu_rows(range(0, 11), 100.0, counter_mj=counter))
    assert hourly(warehouse())[0]["energy_j"] == pytest.approx(1000.0)


def test_gap_longer_than_max_gap_lowers_coverage_instead_of_inventing_energy(lake, warehouse):
    write(lake, gpu_rows(list(range(0, 101)) + list(range(200, 301)), 360.0))
    r = hourly(warehouse(settings=WarehouseSettings(max_gap_s=10.0)))[0]
    assert r["energy_j"] == pytest.approx(360.0 * 200)
    assert r["coverage_ratio"] == pytest.approx(200 / 3600)


def test_counter_bridges_gaps_up_to_max_counter_gap(lake, warehouse):
    # The counter measured the 100 s gap exactly, so it is kept (max_counter_gap_s = 900 s).
    write(lake, gpu_rows([0, 100], None, counter_mj=lambda t: int(t * 50_000)))
    r = hourly(warehouse())[0]
    assert r["energy_j"] == pytest.approx(5000.0)
    assert r["coverage_ratio"] == pytest.approx(100 / 3600)


def test_out_of_order_files_give_the_same_energy(lake, warehouse):
    times = list(range(0, 120))
    write(lake, gpu_rows(times[60:], lambda t: 100.0 + t))  # later readings land first
    write(lake, gpu_rows(times[:60], lambda t: 100.0 + t))
    expected = sum((200.0 + t0 + t0 + 1) / 2 for t0 in range(119))
    assert hourly(warehouse())[0]["energy_j"] == pytest.approx(expected)


def test_duplicate_rows_are_quarantined_and_not_counted_twice(lake, warehouse):
    rows = gpu_rows(range(0, 11), 100.0)
    write(lake, rows)
    write(lake, rows[3:6])
    con = warehouse()
    assert hourly(con)[0]["energy_j"] == pytest.approx(1000.0)
    reasons = con.execute("SELECT reason, count(*) FROM quarantine_gpu_samples GROUP BY ALL").fetchall()
    assert reasons == [("duplicate_key", 3)]


def test_gpu_seen_by_nvml_and_dcgm_is_counted_once_preferring_the_counter(lake, warehouse):
    write(lake, gpu_rows(range(0, 3601), 100.0, counter_mj=lambda t: int(t * 100_000), source="nvml"))
    write(lake, gpu_rows(range(0, 3601), 130.0, source="dcgm"))  # DCGM reads 30% high here
    r = hourly(warehouse())[0]
    assert r["energy_j"] == pytest.approx(100.0 * 3600)
    assert (r["source"], r["energy_source"], r["n_sources"]) == ("nvml", "counter", 2)


def test_a_source_covering_the_hour_beats_a_counter_that_did_not(lake, warehouse):
    write(lake, gpu_rows(range(0, 601), 100.0, counter_mj=lambda t: int(t * 100_000), source="nvml"))
    write(lake, gpu_rows(range(0, 3601), 100.0, source="dcgm"))
    r = hourly(warehouse())[0]
    assert r["source"] == "dcgm" and r["coverage_ratio"] == pytest.approx(1.0)


def test_a_faster_source_with_holes_does_not_beat_one_that_covered_every_second(lake, warehouse):
    """Both counters, no power: NVML at 1 Hz reads power instead of the counter every 60th reading
    (2 s a minute unbridged), DCGM at 10 s covers every minute. The faster source won every minute
    (95% and more covered) and 3.3% of the hour's measured energy was dropped."""
    counter = lambda t: 10**12 + round(t * 300.0 * 1000)  # noqa: E731
    rows = gpu_rows(range(0, 3601), None, counter_mj=counter, source="nvml")
    for r in rows[30::60]:
        r["power_w"], r["energy_mj_total"] = 300.0, None
    write(lake, rows)
    write(lake, gpu_rows(range(0, 3601, 10), None, counter_mj=counter, source="dcgm"))
    r = hourly(warehouse())[0]
    assert (r["source"], r["energy_source"]) == ("dcgm", "counter")
    assert r["energy_j"] == pytest.approx(300.0 * 3600, rel=1e-9) and r["coverage_ratio"] == pytest.approx(1.0)


def test_a_gpu_that_changes_host_within_the_hour_keeps_both_halves(lake, warehouse):
    """An audit: a GPU read under one host name for the first half hour and another for the second
    (a node renamed, a collector restarted under its FQDN) lost one half: the two host streams
    competed as if they were two sources reading the same time."""
    write(lake, gpu_rows(range(0, 1801), 100.0, host="node-01"))
    write(lake, gpu_rows(range(1801, 3601), 100.0, host="node-01.example.net"))
    con = warehouse()
    r = hourly(con)[0]
    assert r["energy_j"] == pytest.approx(100.0 * 3599)  # the step from 1800 to 1801 s crosses hosts: not bridged
    assert r["coverage_ratio"] == pytest.approx(3599 / 3600)
    # the reading at 3600 s opens hour 1; node-01's last (1800 s) measured nothing in the minute
    # node-01.example.net measured from 1801 s: a lone reading beside a measured minute is not taken
    assert r["n_samples"] == 3599 and r["n_sources"] == 1
    # under the host that covered more of the hour (1800 s against 1799 s)
    assert con.execute("SELECT host FROM fct_gpu_energy_hourly WHERE hour(hour_at) = 0").fetchall() == [("node-01",)]
    covered = con.execute("SELECT covered_s, energy_kwh * 3.6e6 FROM fct_gpu_coverage_daily").fetchall()
    assert covered == [(pytest.approx(3599.0), pytest.approx(100.0 * 3599))]


def test_two_hosts_reading_one_gpu_at_once_are_not_summed(lake, warehouse):
    """Two collectors that both claim a GPU over the same time (a copied config) must not double
    its energy: overlapping host streams still compete, one wins."""
    write(lake, gpu_rows(range(0, 3601, 2), 100.0, host="node-01"))
    write(lake, gpu_rows(range(1, 3601, 2), 100.0, host="node-02"))
    r = hourly(warehouse())[0]
    assert r["energy_j"] <= 100.0 * 3600 * (1 + 1e-12)


def test_a_collector_changed_within_the_hour_keeps_both_halves(lake, warehouse):
    """NVML's collector until 00:30, dcgm-exporter from then on: one reading of the GPU through two
    sources one after the other. The hour kept one source and lost the other's half (the NVML
    half's counter beat the DCGM half's power: 50% of the energy)."""
    write(lake, gpu_rows(range(0, 1801), 300.0, counter_mj=lambda t: int(t * 300_000), source="nvml"))
    write(lake, gpu_rows(range(1801, 3601), 300.0, source="dcgm"))
    r = hourly(warehouse())[0]
    assert r["energy_j"] == pytest.approx(300.0 * 3599)  # 1800 -> 1801 s crosses sources: not bridged
    assert r["coverage_ratio"] == pytest.approx(3599 / 3600)
    # the reading at 3600 s opens hour 1; NVML's last (1800 s), alone in DCGM's minute, is not taken
    assert (r["n_sources"], r["n_samples"]) == (2, 3601 - 2)
    assert r["source"] == "nvml" and r["energy_source"] == "counter"  # 1800 s of counter against 1799 s


def test_two_sources_reading_at_once_over_a_switch_keep_the_hour_without_summing_the_overlap(lake, warehouse):
    """Both collectors running for a minute during the switch (NVML until 00:31, DCGM from 00:30):
    where they overlap one is taken, never a sum of two readings of the same time, and the rest
    of each counts. One source per hour kept 558 kJ of the 1,080 kJ."""
    write(lake, gpu_rows(range(0, 1861), 300.0, source="nvml"))
    write(lake, gpu_rows(range(1800, 3601), 300.0, source="dcgm"))
    r = hourly(warehouse())[0]
    assert r["energy_j"] == pytest.approx(300.0 * 3600) and r["coverage_ratio"] == pytest.approx(1.0)
    # the overlap minute, read as well by both, goes to the source the hour ranks first (1,860 s
    # against 1,800 s), and the hour is under the source whose minutes covered more
    assert r["n_sources"] == 2 and (r["source"], r["n_samples"]) == ("nvml", 1860 + 1740)


def test_a_gap_in_the_better_source_is_filled_by_the_other_minute_by_minute(lake, warehouse):
    """NVML (a reading a second) misses ten minutes of an hour that DCGM (every 5 s, reading 20%
    high here) covers whole: each minute is taken from the better source that covered it, NVML's
    100 W for 50 minutes and DCGM's 120 W for the ten only it read. By the hour, DCGM's full
    coverage took all of it (432 kJ), and NVML's readings of 50 minutes counted for nothing."""
    write(lake, gpu_rows([t for t in range(0, 3601) if not 1200 < t < 1800], 100.0, source="nvml"))
    write(lake, gpu_rows(range(0, 3601, 5), 120.0, source="dcgm"))
    r = hourly(warehouse())[0]
    assert r["energy_j"] == pytest.approx(100.0 * 3000 + 120.0 * 600)
    assert r["coverage_ratio"] == pytest.approx(1.0) and r["n_sources"] == 2
    assert (r["source"], r["energy_source"]) == ("nvml", "power_integral")


def test_future_timestamps_beyond_skew_are_quarantined(lake, warehouse):
    now = at(3600)
    write(lake, gpu_rows(range(0, 3600 + 301), 100.0) + gpu_rows([3600 + 400, 3600 + 401], 100.0))
    con = warehouse(now=now, settings=WarehouseSettings(max_clock_skew_s=300.0))
    assert con.execute("SELECT count(*) FROM quarantine_gpu_samples WHERE reason = 'future_timestamp'").fetchone() == (2,)
    assert hourly(con)[1]["energy_j"] == pytest.approx(100.0 * 300)


def test_two_days_add_up_to_the_whole_trace_across_midnight(lake, warehouse):
    write(lake, gpu_rows(range(-1800, 1801), lambda t: 100.0 + (t % 7)))
    con = warehouse(day=DAY - dt.timedelta(days=1))
    warehouse(day=DAY)
    total = con.execute("SELECT sum(energy_kwh) * 3.6e6 FROM fct_gpu_energy_hourly").fetchone()[0]
    expected = sum((200.0 + (t % 7) + ((t + 1) % 7)) / 2 for t in range(-1800, 1800))
    assert total == pytest.approx(expected, rel=1e-12)


def _coverage(con, uuid: str) -> tuple[int, float | None]:
    return con.execute("SELECT n_gaps, longest_gap_s FROM fct_gpu_coverage_daily WHERE gpu_uuid = ? AND day = ?",
                       [uuid, DAY]).fetchone()


def test_gaps_are_counted_per_gpu_and_a_gap_one_source_fills_is_no_gap(lake, warehouse):
    # GPU-A (one stream): readings every second with holes of 60 s and 300 s (max_gap_s is 10 s).
    a = [t for t in range(0, 1000) if not 100 < t < 160 and not 500 < t < 800]
    write(lake, gpu_rows(a, 100.0, uuid="GPU-A"))
    # GPU-B: NVML misses 200..400 s, DCGM reads it, then both miss 600..650 s: one gap of 50 s.
    write(lake, gpu_rows([t for t in range(0, 1000) if not 200 < t < 400 and not 600 < t < 650], 100.0,
                         uuid="GPU-B", source="nvml"))
    write(lake, gpu_rows([t for t in range(150, 1000, 5) if not 600 < t < 650], 100.0, uuid="GPU-B", source="dcgm"))
    con = warehouse()
    assert _coverage(con, "GPU-A") == (2, pytest.approx(300.0))
    assert _coverage(con, "GPU-B") == (1, pytest.approx(50.0))


def test_a_source_whose_rows_carry_no_energy_reading_never_outranks_one_that_measured(lake, warehouse):
    """DCGM writes a row every second but carries power only for the first 10 minutes (then only
    temperatures); NVML measures power for 55 minutes. The hour is NVML's: ranked by raw rows,
    DCGM's 3,600 beat NVML's 3,301 and the hour kept 120 kJ of its 660 kJ."""
    write(lake, gpu_rows(range(0, 3301), 200.0, source="nvml"))
    write(lake, gpu_rows(range(0, 601), 200.0, source="dcgm", temp_c=50.0)
          + gpu_rows(range(601, 3600), None, source="dcgm", temp_c=50.0))
    r = hourly(warehouse())[0]
    assert r["source"] == "nvml" and r["n_sources"] == 2
    assert r["energy_j"] == pytest.approx(200.0 * 3300) and r["coverage_ratio"] == pytest.approx(3300 / 3600)


def test_a_gap_across_midnight_longer_than_the_margin_is_counted_once_on_the_day_it_ends(lake, warehouse):
    """Silent from 23:30 to 00:30 (3,600 s, longer than the build's 900 s margin): the reading
    before the gap was outside the next day's window and the one after outside this day's, so the
    gap was counted on neither day. It is the next day's, measured from the last reading kept."""
    day_s = 86400
    write(lake, gpu_rows([t for t in range(-day_s, 2 * day_s, 10) if not day_s - 1800 < t < day_s + 1800], 100.0))
    con = warehouse(day=DAY - dt.timedelta(days=1))
    warehouse(day=DAY)
    warehouse(day=DAY + dt.timedelta(days=1))
    gaps = con.execute("SELECT day, n_gaps, longest_gap_s, staleness_s FROM fct_gpu_coverage_daily ORDER BY day").fetchall()
    assert [g[:3] for g in gaps] == [(DAY - dt.timedelta(days=1), 0, None), (DAY, 0, None),
                                     (DAY + dt.timedelta(days=1), 1, pytest.approx(3600.0))]
    assert gaps[1][3] == pytest.approx(1800.0)  # the day that went silent shows it as its staleness


def test_a_coverage_table_from_before_the_last_energy_reading_still_measures_the_gap(lake, warehouse):
    day_s = 86400
    write(lake, gpu_rows([t for t in range(-day_s, 2 * day_s, 10) if not day_s - 1800 < t < day_s + 1800], 100.0))
    con = warehouse(day=DAY)
    con.execute("ALTER TABLE fct_gpu_coverage_daily DROP COLUMN last_energy_reading_at")  # as stored before
    warehouse(day=DAY + dt.timedelta(days=1))
    assert con.execute("SELECT n_gaps, longest_gap_s, last_energy_reading_at IS NOT NULL FROM fct_gpu_coverage_daily "
                       "WHERE day = ?", [DAY + dt.timedelta(days=1)]).fetchone() == (1, pytest.approx(3600.0), True)
