"""The recommender's fast paths agree with the slow ones they replaced: the tenths of busy activity
from a histogram (recommend_gpu_profile.sql) against the exact tenths from sorting the samples
(recommend_exact_tenths.sql), and the settings x bins scoring (models.cap_scoring) against
models.caps one bin and one setting at a time; both give a profile the power of its readings at the
clock they were read at."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings as hsettings, strategies as st
from lanes import examples

from joulehouse.models.caps import MIN_CLOCK_RATIO, WorkloadProfile, outcome_under_limit, power_at_clock_w, time_ratio
from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.cap_scoring import score, score_clocks, score_limits
from joulehouse.models.recommend_inputs import gpu_day_profiles

EXACT_SQL = (Path(__file__).parent / "recommend_exact_tenths.sql").read_text()
# Stated tolerances of the histogram tenths. Activity: the bin width (0.002), a bound: a tenth takes
# whole bins and, of its edge bins, a share at the bin's mean, which is within a bin width of the
# samples the sort would have taken. Locked share and locked clock: edge bins' locked samples are
# split pro rata where the sort splits them by activity and time; measured on simulated fleets at
# most 0.0072 and 2.8 MHz (16 GPUs x 1 day at 10 s), 0.0029 and 2.0 MHz (64 GPUs at 1 Hz), 0.0032
# and 5.9 MHz (256 GPUs at 1 Hz): asserted with margin. (Activity itself came within 3e-5.)
ACTIVITY_TOLERANCE = 2e-3
LOCKED_SHARE_TOLERANCE = 0.015
LOCKED_CLOCK_TOLERANCE_MHZ = 10.0


def _tenths(con, day: dt.date, sql: str) -> dict[str, dict]:
    cur = con.execute(sql, {"day": day})
    names = [d[0] for d in cur.description]
    return {r["gpu_uuid"]: r for r in (dict(zip(names, row)) for row in cur.fetchall())}


def _profiles(con, day: dt.date, samples_relation: str) -> dict[str, dict]:
    """The recommender's profiles; no model has a fit here, so the tenths are of each stream's
    activity, the measure the exact tenths sort."""
    return {r["gpu_uuid"]: r for r in gpu_day_profiles(con, day, samples_relation, fits={})}


def _compare(con, day: dt.date, samples_relation: str) -> dict[str, float]:
    """Largest deviation of the profile's tenths from the exact ones, per list; both list the same GPUs."""
    approx = {u: r for u, r in _profiles(con, day, samples_relation).items() if r["activity_deciles"]}
    exact = _tenths(con, day, EXACT_SQL)
    assert approx.keys() == exact.keys() and exact
    worst = {"activity_deciles": 0.0, "locked_share_deciles": 0.0, "locked_clock_mhz_deciles": 0.0}
    for uuid, e in exact.items():
        for key in worst:
            a = np.array([np.nan if v is None else v for v in approx[uuid][key]], dtype=float)
            x = np.array([np.nan if v is None else v for v in e[key]], dtype=float)
            both = ~np.isnan(a) & ~np.isnan(x)
            if key != "locked_clock_mhz_deciles":  # a pro-rata edge share can name a clock the sort did not
                assert (np.isnan(a) == np.isnan(x)).all(), (uuid, key, a, x)
            if both.any():
                worst[key] = max(worst[key], float(np.max(np.abs(a[both] - x[both]))))
    return worst


@pytest.mark.slow
def test_histogram_tenths_match_sorted_tenths_on_a_simulated_fleet(sim_warehouse):
    worst = _compare(sim_warehouse.con, sim_warehouse.day, "stg_gpu_samples")
    print(f"largest deviation from the exact tenths: {worst}")
    assert worst["activity_deciles"] <= ACTIVITY_TOLERANCE
    assert worst["locked_share_deciles"] <= LOCKED_SHARE_TOLERANCE
    assert worst["locked_clock_mhz_deciles"] <= LOCKED_CLOCK_TOLERANCE_MHZ


def test_histogram_tenths_are_exact_on_a_real_log_of_whole_percent_utilisation(shared_data):
    """nvidia-smi gives utilisation in whole percent: each value is a bin of its own, so the
    tenths' means are exact, ties and all (the log: an RTX 4090, 1 Hz, ../shared/data/telemetry)."""
    ingest = pytest.importorskip("joulehouse.collectors.ingest.nvidia_smi")
    table = ingest.read_nvidia_smi_csv(shared_data / "telemetry" / "vlm_optimization_gpu_log_rtx4090_1hz.csv",
                                       host="real-host").table
    table = table.append_column("day", pc.cast(table.column("sampled_at"), pa.date32()))
    con = duckdb.connect()
    con.register("log", table)
    for day in {d for d in table.column("day").to_pylist()}:
        worst = _compare(con, day, "log")
        assert worst["activity_deciles"] <= 1e-12, (day, worst)


@hsettings(max_examples=examples(25), deadline=None)
@given(values=st.lists(st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.3, 0.31, 0.9, 1.0])), min_size=5, max_size=200),
       locked=st.lists(st.booleans(), min_size=200, max_size=200))
def test_histogram_tenths_keep_every_sample_and_stay_within_a_bin_of_the_sort(values, locked):
    """Any activity mix, ties included: each tenth within the bin width of the exact one, and the
    tenths together hold exactly the day's busy samples and locked samples."""
    start = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
    n = len(values)
    rows = pa.table({
        "host": ["h"] * n, "gpu_uuid": ["GPU-x"] * n, "gpu_model": ["m"] * n,
        "sampled_at": pa.array([start + dt.timedelta(seconds=i) for i in range(n)], pa.timestamp("us", "UTC")),
        "day": pa.array([start.date()] * n, pa.date32()), "power_w": [100.0] * n, "power_limit_w": [400.0] * n,
        "sm_active_ratio": values, "util_gpu_pct": [None] * n, "dram_active_ratio": [0.1] * n, "util_mem_pct": [10.0] * n,
        "pcie_tx_bytes_per_s": [0] * n, "pcie_rx_bytes_per_s": [0] * n, "temp_c": [50.0] * n,
        "sm_clock_mhz": [1000] * n, "clock_event_reasons": [2 if lock else 0 for lock in locked[:n]],
    })
    con = duckdb.connect()
    con.register("samples", rows)
    busy = [(v, lock) for v, lock in zip(values, locked) if v > 0.05]
    if len(busy) < 10:  # too few busy samples for tenths: neither gives any
        assert _profiles(con, start.date(), "samples")["GPU-x"]["activity_deciles"] is None
        assert not _tenths(con, start.date(), EXACT_SQL)
        return
    worst = _compare(con, start.date(), "samples")
    assert worst["activity_deciles"] <= ACTIVITY_TOLERANCE
    profile = _profiles(con, start.date(), "samples")["GPU-x"]
    sizes = [len(busy) // 10 + (k < len(busy) % 10) for k in range(10)]
    assert np.dot(sizes, profile["activity_deciles"]) == pytest.approx(sum(v for v, _ in busy), rel=1e-9)
    assert np.dot(sizes, profile["locked_share_deciles"]) == pytest.approx(sum(lock for _, lock in busy), abs=1e-9)


coefficients = st.builds(
    PowerCoefficients, static_w=st.floats(20, 120), temp_w_per_c=st.floats(-0.5, 1.5), dyn_w=st.floats(50, 600),
    dyn_freq_exponent=st.one_of(st.none(), st.floats(1.0, 3.5)), mem_w=st.floats(0, 150),
    pcie_w_per_gbps=st.floats(0, 3), f_max_mhz=st.just(1410.0), activity_exponent=st.floats(0.3, 1.0))
bins = st.lists(st.tuples(st.builds(WorkloadProfile, activity_ratio=st.floats(1e-3, 1.0), memory_ratio=st.floats(0, 1),
                                    pcie_gbps=st.floats(0, 80), temp_c=st.floats(30, 85),
                                    clock_ratio=st.one_of(st.just(1.0), st.floats(0.2, 1.0))),
                          st.floats(0.01, 1.0)), min_size=1, max_size=12)


@hsettings(max_examples=examples(40), deadline=None)
@given(coef=coefficients, mix=bins, limits=st.lists(st.floats(50, 800), min_size=1, max_size=6))
def test_limits_scored_at_once_equal_models_caps_one_at_a_time(coef, mix, limits):
    fast = score_limits(coef, mix, np.array(limits))
    for limit_w, got in zip(limits, fast):
        def one(b, limit_w=limit_w):
            o = outcome_under_limit(coef, b, limit_w)
            return o.power_w, 1 + o.slowdown_pct / 100, o.cap_binds
        want = score(mix, one)
        assert got.binds == want.binds
        assert got.power_w == pytest.approx(want.power_w, rel=1e-9)
        assert got.slowdown_pct == pytest.approx(want.slowdown_pct, abs=1e-9)
        assert got.heavy_slowdown_pct == pytest.approx(want.heavy_slowdown_pct, abs=1e-9)


@hsettings(max_examples=examples(40), deadline=None)
@given(coef=coefficients, mix=bins, clocks=st.lists(st.floats(MIN_CLOCK_RATIO, 1.0), min_size=1, max_size=6))
def test_clocks_scored_at_once_equal_models_caps_one_at_a_time(coef, mix, clocks):
    fast = score_clocks(coef, mix, np.array(clocks))
    for s, got in zip(clocks, fast):
        def one(b, s=s):
            clock = min(s, b.clock_ratio)
            return power_at_clock_w(coef, b, clock), time_ratio(b, clock) / time_ratio(b, b.clock_ratio), False
        want = score(mix, one)
        assert not got.binds
        assert got.power_w == pytest.approx(want.power_w, rel=1e-9)
        assert got.slowdown_pct == pytest.approx(want.slowdown_pct, abs=1e-9)
        assert got.heavy_slowdown_pct == pytest.approx(want.heavy_slowdown_pct, abs=1e-9)


profiles = st.builds(WorkloadProfile, activity_ratio=st.floats(1e-3, 1.0), memory_ratio=st.floats(0, 1),
                     pcie_gbps=st.floats(0, 80), temp_c=st.floats(30, 85), clock_ratio=st.floats(0.2, 1.0))


def _measured_power_w(coef: PowerCoefficients, b: WorkloadProfile) -> float:
    """The fitted model's power of the profile's readings, at the clock they were read at."""
    return float(coef.predict_power_w(temp_c=b.temp_c, activity_ratio=b.activity_ratio, clock_ratio=b.clock_ratio,
                                      memory_ratio=b.memory_ratio, pcie_gbps=b.pcie_gbps))


@hsettings(max_examples=examples(60), deadline=None)
@given(coef=coefficients, b=profiles, s=st.floats(MIN_CLOCK_RATIO, 1.0))
def test_both_paths_give_the_measured_power_at_the_measured_clock_and_agree_elsewhere(coef, b, s):
    """At the profile's own clock both paths give the power its readings were fitted to (DRAM and
    PCIe were read there); at any clock at or below it (where a lock or a cap puts it) they agree
    to 1e-12. Thinned from f_max instead, a locked profile lost DRAM and PCIe power at its own clock."""
    measured_w = _measured_power_w(coef, b)
    assert power_at_clock_w(coef, b, b.clock_ratio) == pytest.approx(measured_w, rel=1e-12)
    at_own_clock = score_clocks(coef, [(b, 1.0)], np.array([1.0]))[0]
    assert at_own_clock.power_w == pytest.approx(measured_w, rel=1e-12) and at_own_clock.slowdown_pct == 0.0
    clock = min(s, b.clock_ratio)
    fast_w = score_clocks(coef, [(b, 1.0)], np.array([s]))[0].power_w
    assert fast_w == pytest.approx(power_at_clock_w(coef, b, clock), rel=1e-12)


@hsettings(max_examples=examples(60), deadline=None)
@given(coef=coefficients, b=profiles, s=st.floats(MIN_CLOCK_RATIO, 1.0))
def test_dram_and_pcie_energy_per_unit_of_work_is_what_was_measured_at_every_clock(coef, b, s):
    """The model's assumption (DRAM and PCIe work do not stretch with the SM clock): their power times
    the run time, relative to the measured run, is their measured power at every clock, in both paths."""
    no_traffic = replace(coef, mem_w=0.0, pcie_w_per_gbps=0.0)
    measured_w = coef.mem_w * b.memory_ratio + coef.pcie_w_per_gbps * b.pcie_gbps
    stretch = time_ratio(b, s) / time_ratio(b, b.clock_ratio)
    traffic_w = power_at_clock_w(coef, b, s) - power_at_clock_w(no_traffic, b, s)
    assert traffic_w * stretch == pytest.approx(measured_w, rel=1e-12, abs=1e-9)
    fast, fast_without = (score_clocks(c, [(b, 1.0)], np.array([s]))[0] for c in (coef, no_traffic))
    fast_traffic_w = fast.power_w - fast_without.power_w
    assert fast_traffic_w * (1 + fast.slowdown_pct / 100) == pytest.approx(measured_w, rel=1e-12, abs=1e-9)
