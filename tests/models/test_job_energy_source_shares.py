"""The jobs' shares of a GPU-hour (fct_job_energy_hourly.energy_share_ratio) follow the readings
the hour's energy came from (fct_gpu_energy_hourly), each weighing the time it stands for.

Before, the shares read every source's readings, one reading one vote. NVML reading the whole
hour at 1 Hz and DCGM only its second half (an exporter restarted): the second half was read
twice and weighed twice, job A (first half) 1/3, job B (second half) 2/3 at equal power. NVML at
1 Hz until the half hour, then DCGM every 10 s (the collector changed): A 91%, B 9%. The hour's
energy was right both times, so the accounts charged B for A's energy (and the other way round)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from joulehouse.collectors.writer import write_dataset
from joulehouse.models.efficiency import build_efficiency
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

UTC = dt.timezone.utc
DAY = dt.date(2026, 1, 2)
MIDNIGHT = dt.datetime(2026, 1, 2, tzinfo=UTC)
NOW = dt.datetime(2026, 1, 10, tzinfo=UTC)
POWER_W = 300.0


def _reading(s: int, source: str, power_w: float = POWER_W, counter: bool = True) -> dict:
    return dict(sampled_at=MIDNIGHT + dt.timedelta(seconds=s), host="node-01", gpu_index=0, gpu_uuid="GPU-0",
                gpu_model="NVIDIA H100 80GB HBM3", power_w=power_w,
                energy_mj_total=10**9 + s * round(POWER_W * 1000) if counter else None,
                power_limit_w=700.0, source=source)


def _job(job_id: str, start_s: int, end_s: int) -> dict:
    return dict(job_id=job_id, host="node-01", gpu_uuid="GPU-0", team="vision", user="ana", stage="training",
                workload_class="throughput", started_at=MIDNIGHT + dt.timedelta(seconds=start_s),
                ended_at=MIDNIGHT + dt.timedelta(seconds=end_s))


def _hour_zero(root, readings: list[dict], jobs: list[dict], settings: WarehouseSettings | None = None):
    """Build the day from `readings` and `jobs`; the jobs' rows of the first hour, by job_id
    (energy_share_ratio, energy_kwh, n_samples), and that GPU-hour's fct_gpu_energy_hourly row."""
    settings = settings or WarehouseSettings()
    lake = root / "lake"
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(readings))
    write_dataset(lake, "jobs", pa.Table.from_pylist(jobs))
    con = connect(root / "w.duckdb", lake)
    try:
        build_day(con, DAY, settings, now=NOW)
        build_efficiency(con, DAY, warehouse=settings)
        rows = {r[0]: r[1:] for r in con.execute(
            "SELECT job_id, energy_share_ratio, energy_kwh, n_samples FROM fct_job_energy_hourly "
            "WHERE day = ? AND hour_at = ?", [DAY, MIDNIGHT]).fetchall()}
        gpu_hour = con.execute("SELECT energy_kwh, source, n_sources FROM fct_gpu_energy_hourly "
                               "WHERE day = ? AND hour_at = ?", [DAY, MIDNIGHT]).fetchone()
    finally:
        con.close()
    return rows, gpu_hour


def _shares(rows) -> dict[str, float]:
    return {job: row[0] for job, row in rows.items()}


HALVES = [_job("a", 0, 1800), _job("b", 1800, 3600)]


def test_a_second_source_reading_half_the_hour_does_not_weigh_that_half_twice(tmp_path):
    # NVML the whole hour at 1 Hz; DCGM from the half hour on, at 1 Hz too (before: a 1/3, b 2/3)
    readings = ([_reading(s, "nvml") for s in range(0, 3601)]
                + [_reading(s, "dcgm") for s in range(1800, 3601)])
    rows, (gpu_kwh, source, n_sources) = _hour_zero(tmp_path, readings, HALVES)
    assert (source, n_sources) == ("nvml", 2)  # the hour's energy is NVML's alone
    assert gpu_kwh == pytest.approx(POWER_W / 1000, rel=1e-3)
    assert _shares(rows) == pytest.approx({"a": 0.5, "b": 0.5}, abs=1e-3)
    assert sum(r[1] for r in rows.values()) == pytest.approx(gpu_kwh, rel=1e-9)


@pytest.mark.parametrize("dcgm_every_s", [10, 30])
def test_sources_one_after_the_other_weigh_by_time_not_by_reading_count(tmp_path, dcgm_every_s):
    # NVML at 1 Hz until the half hour, then DCGM (with its energy counter, so 30 s is bridged
    # too): the energy adds both up. Before: a 1800 readings of 1980 (91%) at 10 s, 97% at 30 s
    readings = ([_reading(s, "nvml") for s in range(0, 1800)]
                + [_reading(s, "dcgm") for s in range(1800, 3601, dcgm_every_s)])
    rows, (gpu_kwh, source, n_sources) = _hour_zero(tmp_path, readings, HALVES)
    assert n_sources == 2
    assert gpu_kwh == pytest.approx(POWER_W / 1000, rel=2e-3)
    assert _shares(rows) == pytest.approx({"a": 0.5, "b": 0.5}, abs=1e-3)
    assert sum(r[1] for r in rows.values()) == pytest.approx(gpu_kwh, rel=2e-3)


def test_readings_the_energy_did_not_bridge_weigh_nothing(tmp_path):
    # DCGM every 30 s without an energy counter: over warehouse.max_gap_s (10 s) the power
    # integral leaves its half of the hour unread, so the hour's energy is all job a's
    readings = ([_reading(s, "nvml", counter=False) for s in range(0, 1800)]
                + [_reading(s, "dcgm", counter=False) for s in range(1800, 3601, 30)])
    rows, (gpu_kwh, _, _) = _hour_zero(tmp_path, readings, HALVES)
    assert gpu_kwh == pytest.approx(POWER_W / 2000, rel=2e-3)
    assert _shares(rows) == pytest.approx({"a": 1.0, "b": 0.0}, abs=1e-3)
    # with a max_gap_s that bridges 30 s, the same readings split the hour evenly: the bound
    # reaches the shares (build_efficiency's `warehouse`) as it reached the energy
    rows, (gpu_kwh, _, _) = _hour_zero(tmp_path / "bridged", readings, HALVES, WarehouseSettings(max_gap_s=60.0))
    assert gpu_kwh == pytest.approx(POWER_W / 1000, rel=2e-3)
    assert _shares(rows) == pytest.approx({"a": 0.5, "b": 0.5}, abs=1e-3)


def test_one_source_at_1_hz_splits_as_before(tmp_path):
    # one NVML stream at 1 Hz, power changing every second, two pods sharing the GPU from minute
    # 20 to 40: the shares are the power read in each one's windows (a shared reading split
    # equally), over the power read in the hour, as they were
    def power(s: int) -> float:
        return 60.0 + (s * 37 % 640)

    readings = [_reading(s, "nvml", power_w=power(s)) for s in range(0, 3601)]
    rows, _ = _hour_zero(tmp_path, readings, [_job("a", 0, 2400), _job("b", 1200, 3600)])
    hour_w = sum(power(s) for s in range(3600))
    shared_w = sum(power(s) for s in range(1200, 2400)) / 2
    expected = {"a": (sum(power(s) for s in range(1200)) + shared_w) / hour_w,
                "b": (sum(power(s) for s in range(2400, 3600)) + shared_w) / hour_w}
    assert _shares(rows) == pytest.approx(expected, abs=1e-6)
    assert {job: row[2] for job, row in rows.items()} == {"a": 2400, "b": 2400}


def test_readings_with_a_counter_but_no_power_still_give_their_job_its_energy(tmp_path):
    """The counter read every second all hour at 300 W, the power reading failed for the first
    half (NULL). The hour's energy is the counter's; each half held by its own job is half of it.
    Before, a reading without power weighed 0 W: job a got 0, job b the whole hour."""
    readings = ([_reading(s, "nvml", power_w=None) for s in range(0, 1800)]
                + [_reading(s, "nvml") for s in range(1800, 3601)])
    rows, (gpu_kwh, _, _) = _hour_zero(tmp_path, readings, HALVES)
    assert gpu_kwh == pytest.approx(POWER_W / 1000, rel=1e-9)
    assert _shares(rows) == pytest.approx({"a": 0.5, "b": 0.5}, abs=1e-3)
    assert sum(r[1] for r in rows.values()) == pytest.approx(gpu_kwh, rel=1e-9)


def test_a_source_stopping_on_a_minute_boundary_does_not_tip_the_shares(tmp_path):
    """DCGM every 10 s until exactly 00:30:00 beside NVML all hour: DCGM's last reading, alone in
    a minute NVML measured, was added to the hour's count, which then matched no stream, and every
    reading of both counted: 2/3 : 1/3 at equal power."""
    readings = ([_reading(s, "nvml") for s in range(0, 3601)] + [_reading(s, "dcgm") for s in range(0, 1801, 10)])
    rows, (gpu_kwh, source, n_sources) = _hour_zero(tmp_path, readings, HALVES)
    assert (source, n_sources) == ("nvml", 2)
    assert _shares(rows) == pytest.approx({"a": 0.5, "b": 0.5}, abs=1e-3)


def test_minutes_taken_from_two_sources_weigh_the_readings_each_minute_was_taken_from(tmp_path):
    """NVML (100 W, 1 Hz) misses ten minutes that DCGM (120 W, every 5 s) fills: the hour is NVML's
    50 minutes and DCGM's 10, and each job's share is what its minutes contributed (a 120 kJ, b
    72 kJ, c 180 kJ of 372 kJ). Every reading counting gave b 10% for its 19%."""
    readings = ([_reading(s, "nvml", power_w=100.0, counter=False) for s in range(0, 3601) if not 1200 < s < 1800]
                + [_reading(s, "dcgm", power_w=120.0, counter=False) for s in range(0, 3601, 5)])
    jobs = [_job("a", 0, 1200), _job("b", 1200, 1800), _job("c", 1800, 3600)]
    rows, (gpu_kwh, _, n_sources) = _hour_zero(tmp_path, readings, jobs)
    assert n_sources == 2 and gpu_kwh * 3.6e6 == pytest.approx(372_000.0)
    assert _shares(rows) == pytest.approx({"a": 120 / 372, "b": 72 / 372, "c": 180 / 372}, abs=1e-6)
    assert sum(r[1] for r in rows.values()) == pytest.approx(gpu_kwh, rel=1e-9)
