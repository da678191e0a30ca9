"""Invariants of fct_gpu_energy_hourly on generated traces (Hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lanes import examples
from warehouse_lakes import gpu_rows, write

from joulehouse.settings import WarehouseSettings

PROPERTY = settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
MAX_GAP_S = 10.0


def _fresh(tmp_path_factory):
    from joulehouse.warehouse.build import build_day
    from joulehouse.warehouse.db import connect
    from warehouse_lakes import DAY, NOW

    root = tmp_path_factory.mktemp("prop")
    lake = root / "lake"

    def build(rows):
        write(lake, rows)
        con = connect(root / "w.duckdb", lake)
        build_day(con, DAY, WarehouseSettings(max_gap_s=MAX_GAP_S), now=NOW)
        return con

    return build


traces = st.lists(
    st.tuples(st.integers(1, 25), st.floats(0, 700, allow_nan=False, width=32)), min_size=2, max_size=200
).map(lambda steps: [(sum(s for s, _ in steps[: i + 1]) + 3000, p) for i, (_, p) in enumerate(steps)])


@PROPERTY
@given(trace=traces)
def test_hours_are_never_negative_and_add_up_to_the_whole_window(tmp_path_factory, trace):
    times = dict(trace)
    con = _fresh(tmp_path_factory)(gpu_rows(list(times), lambda t: times[t]))
    rows = con.execute("SELECT energy_kwh * 3.6e6 FROM fct_gpu_energy_hourly WHERE energy_kwh IS NOT NULL").fetchall()
    assert all(e >= 0 for (e,) in rows)
    ts = sorted(times)
    whole = sum(
        (times[a] + times[b]) / 2 * (b - a) for a, b in zip(ts, ts[1:]) if b - a <= MAX_GAP_S
    )
    assert sum(e for (e,) in rows) == pytest.approx(whole, rel=1e-9, abs=1e-6)


@PROPERTY
@given(power_w=st.floats(0, 1000, allow_nan=False, width=32), start_s=st.integers(0, 3600), duration_s=st.integers(2, 7000))
def test_constant_power_over_t_seconds_gives_power_times_t(tmp_path_factory, power_w, start_s, duration_s):
    con = _fresh(tmp_path_factory)(gpu_rows(range(start_s, start_s + duration_s + 1), power_w))
    total, covered = con.execute("SELECT sum(energy_kwh) * 3.6e6, sum(coverage_ratio) * 3600 FROM fct_gpu_energy_hourly").fetchone()
    assert total == pytest.approx(power_w * duration_s, rel=1e-6, abs=1e-3)
    assert covered == pytest.approx(duration_s)


@settings(max_examples=examples(4), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base_w=st.floats(60, 400), swing_ratio=st.floats(0, 0.9), period_s=st.floats(60, 1800), phase=st.floats(0, 6.28)
)
def test_counter_and_power_integral_agree_on_a_smooth_1hz_trace(tmp_path_factory, base_w, swing_ratio, period_s, phase):
    w, swing_w = 2 * math.pi / period_s, swing_ratio * base_w

    def power(t):
        return base_w + swing_w * math.sin(w * t + phase)

    def counter_mj(t):  # exact integral of power, mJ, as the device would count it
        return int(1000 * (base_w * t - swing_w / w * (math.cos(w * t + phase) - math.cos(phase))))

    seconds = range(0, 5401)
    rows = gpu_rows(seconds, power, counter_mj=counter_mj, uuid="GPU-counter") + gpu_rows(seconds, power, uuid="GPU-power")
    con = _fresh(tmp_path_factory)(rows)
    got = con.execute(
        "SELECT hour_at, energy_source, energy_kwh FROM fct_gpu_energy_hourly WHERE energy_kwh IS NOT NULL ORDER BY gpu_uuid, hour_at"
    ).fetchall()
    by_source = {}
    for hour_at, source, kwh in got:
        by_source.setdefault(source, {})[hour_at] = kwh
    assert set(by_source) == {"counter", "power_integral"}
    for hour_at, kwh in by_source["counter"].items():
        assert by_source["power_integral"][hour_at] == pytest.approx(kwh, rel=0.005)
