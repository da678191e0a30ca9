"""A valid reading always wins over its invalid duplicates: the copy is quarantined as
duplicate_key, never the reading it duplicates, so invalid copies change no hour's energy."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lanes import examples
from warehouse_lakes import DAY, NOW, gpu_rows, write

from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

# Each breaks one quarantine rule; most sort before a valid power under `power_w NULLS LAST`.
INVALID = [dict(power_w=-3.0), dict(power_w=float("nan")), dict(power_w=250_000.0), dict(temp_c=180.0),
           dict(sm_active_ratio=1.7), dict(util_gpu_pct=140.0), dict(energy_mj_total=-5)]
PROPERTY = settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _hourly(root, rows) -> dict:
    lake = root / "lake"
    write(lake, rows)
    con = connect(root / "w.duckdb", lake)
    build_day(con, DAY, WarehouseSettings(max_gap_s=10.0), now=NOW)
    got = {h: (e, c) for h, e, c in con.execute(
        "SELECT hour_at, energy_kwh, coverage_ratio FROM fct_gpu_energy_hourly WHERE day = ?", [DAY]).fetchall()}
    reasons = dict(con.execute("SELECT reason, count(*) FROM quarantine_gpu_samples GROUP BY ALL").fetchall())
    con.close()
    return got, reasons


def test_the_valid_copy_of_a_duplicated_reading_is_kept(tmp_path):
    rows = gpu_rows(range(0, 20), 100.0, temp_c=50.0)
    bad = dict(rows[7], power_w=-3.0)
    (tmp_path / "a").mkdir()
    energy, reasons = _hourly(tmp_path / "a", rows + [bad])
    assert reasons == {"duplicate_key": 1}
    (e, coverage), = energy.values()
    assert e * 3.6e6 == pytest.approx(100.0 * 19) and coverage * 3600 == pytest.approx(19)


def test_of_two_valid_copies_the_one_with_the_counter_is_kept(tmp_path):
    """The copy without the counter sorted first by its lower power: the counter then had a hole of
    two intervals around it, bridged by power (a 1 Hz sample of a GPU whose draw moves within it)."""
    rows = gpu_rows(range(0, 61), 300.0, counter_mj=lambda t: 1_000_000 + int(t) * 500_000, temp_c=50.0)
    emptier = dict(rows[30], power_w=200.0, energy_mj_total=None)
    (tmp_path / "a").mkdir()
    energy, reasons = _hourly(tmp_path / "a", rows + [emptier])
    assert reasons == {"duplicate_key": 1}
    (e, coverage), = energy.values()
    assert e * 3.6e6 == pytest.approx(500.0 * 60) and coverage * 3600 == pytest.approx(60)


@PROPERTY
@given(copies=st.lists(st.tuples(st.integers(0, 299), st.sampled_from(range(len(INVALID)))), min_size=1, max_size=40),
       powers=st.lists(st.floats(0, 650, allow_nan=False, width=32), min_size=300, max_size=300))
def test_adding_invalid_copies_of_readings_never_changes_any_hours_energy(tmp_path_factory, copies, powers):
    times = [i * 13 for i in range(300)]  # 13 s apart across the first hour boundaries
    rows = gpu_rows([t * 1.0 for t in times], lambda t: powers[int(t) // 13], temp_c=50.0,
                    counter_mj=lambda t: 1_000_000 + int(t) * 300_000)
    base, _ = _hourly(tmp_path_factory.mktemp("base"), rows)
    extra = [dict(rows[i], **INVALID[k]) for i, k in copies]
    with_copies, reasons = _hourly(tmp_path_factory.mktemp("copies"), rows + extra)
    assert with_copies == base
    assert reasons == {"duplicate_key": len(extra)}
