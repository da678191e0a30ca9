"""A job's energy in fct_job_efficiency when the jobs relation is not one clean row per job and GPU:
a row shipped twice, two pods sharing one GPU, a job requeued onto the same GPU. Before, each
copy of a row took the GPU's whole energy in its window again (a duplicated row read 4x what
the GPU drew; two pods at once 2x), and a requeued job came out as two rows of one key, each
with both holdings' energy. The jobs of a GPU never sum to more than the GPU drew."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

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
HOURS = 4  # the GPU draws POWER_W from midnight for HOURS hours, read every 10 s


def _at(minutes: float) -> dt.datetime:
    return MIDNIGHT + dt.timedelta(minutes=minutes)


def _readings() -> pa.Table:
    times = [MIDNIGHT + dt.timedelta(seconds=s) for s in range(0, HOURS * 3600 + 1, 10)]
    return pa.Table.from_pylist([
        dict(sampled_at=t, host="node-01", gpu_index=0, gpu_uuid="GPU-0", gpu_model="NVIDIA H100 80GB HBM3",
             power_w=POWER_W, energy_mj_total=round((t - MIDNIGHT).total_seconds() * POWER_W * 1000),
             power_limit_w=700.0, source="nvml")
        for t in times])


def _job(job_id: str, start_min: float, end_min: float, **extra) -> dict:
    return dict(job_id=job_id, host="node-01", gpu_uuid="GPU-0", started_at=_at(start_min),
                ended_at=_at(end_min), team="vision", user="ana", stage="training",
                workload_class="throughput", **extra)


def _efficiency(root, jobs: list[dict], readings: pa.Table | None = None) -> dict[str, dict]:
    lake = root / "lake"
    write_dataset(lake, "gpu_samples", _readings() if readings is None else readings)
    write_dataset(lake, "jobs", pa.Table.from_pylist(jobs))
    con = connect(root / "w.duckdb", lake)
    try:
        build_day(con, DAY, WarehouseSettings(), now=NOW)
        build_efficiency(con, DAY)
        cur = con.execute("SELECT * FROM fct_job_efficiency WHERE day = ? ORDER BY job_id", [DAY])
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        con.close()
    assert len({r["job_id"] for r in rows}) == len(rows), "one row per (day, job, GPU)"
    return {r["job_id"]: r for r in rows}


def _kwh(minutes: float) -> float:
    return POWER_W * minutes * 60 / 3.6e6


def test_a_job_row_shipped_twice_counts_once(tmp_path):
    job = _job("train-1", 30, 90, flops_total=6.0e15)
    rows = _efficiency(tmp_path, [job, dict(job)])
    assert rows["train-1"]["energy_kwh"] == pytest.approx(_kwh(60), rel=1e-3)
    assert rows["train-1"]["busy_hours"] == pytest.approx(1.0)
    assert rows["train-1"]["flops_total"] == pytest.approx(6.0e15)


def test_a_copy_extended_later_counts_once_with_its_latest_end(tmp_path):
    rows = _efficiency(tmp_path, [_job("pod-a", 0, 60), _job("pod-a", 0, 120)])
    assert rows["pod-a"]["energy_kwh"] == pytest.approx(_kwh(120), rel=1e-3)
    assert rows["pod-a"]["ended_at"] == _at(120)


def test_two_pods_sharing_a_gpu_split_its_energy(tmp_path):
    rows = _efficiency(tmp_path, [_job("pod-a", 0, 120), _job("pod-b", 60, 180)])
    # alone 60 min, shared 60 min: 60 + 30 each
    assert rows["pod-a"]["energy_kwh"] == pytest.approx(_kwh(90), rel=1e-3)
    assert rows["pod-b"]["energy_kwh"] == pytest.approx(_kwh(90), rel=1e-3)


def test_a_requeued_job_is_one_row_with_both_holdings(tmp_path):
    rows = _efficiency(tmp_path, [_job("train-2", 0, 30, samples_total=300),
                                  _job("train-2", 120, 180, samples_total=600)])
    row = rows["train-2"]
    assert row["energy_kwh"] == pytest.approx(_kwh(90), rel=1e-3)
    assert row["busy_hours"] == pytest.approx(1.5)
    assert row["samples_total"] == pytest.approx(900)
    assert (row["started_at"], row["ended_at"]) == (_at(0), _at(180))
    assert row["j_per_sample"] == pytest.approx(_kwh(90) * 3.6e6 / 900, rel=1e-3)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, HOURS * 60 - 10), st.integers(5, 150),
                          st.booleans()), min_size=1, max_size=6))
def test_the_jobs_of_a_gpu_never_draw_more_than_it_did(tmp_path_factory, spans):
    """Any jobs, overlapping, repeated, copied: their energy sums to at most the GPU's, and to
    exactly what the GPU drew while any of them held it."""
    jobs = []
    for job_id, start, length, copied in spans:
        jobs.append(_job(job_id, start, min(start + length, HOURS * 60)))
        if copied:
            jobs.append(dict(jobs[-1]))
    rows = _efficiency(tmp_path_factory.mktemp("jobs"), jobs)
    held_s = set()
    for j in jobs:
        held_s.update(range(int((j["started_at"] - MIDNIGHT).total_seconds()),
                            int((j["ended_at"] - MIDNIGHT).total_seconds()), 10))
    drawn_kwh = POWER_W * len(held_s) * 10 / 3.6e6
    assert sum(r["energy_kwh"] for r in rows.values()) == pytest.approx(drawn_kwh, rel=2e-3, abs=1e-6)
    assert sum(r["energy_kwh"] for r in rows.values()) <= _kwh(HOURS * 60) * (1 + 1e-9)


def test_a_collector_outage_during_a_job_does_not_make_it_look_more_efficient(tmp_path):
    """Readings missing 00:30-01:30 of a 2 h job at a steady 300 W: the energy stops where the
    readings do (0.3 kWh) while the time and the work did not, so it read 150 W, 150 J/sample and
    twice the FLOPs per joule; per setting too, and as a saving in the outcome's energy per unit."""
    readings = _readings().to_pylist()
    kept = pa.Table.from_pylist([r for r in readings if not _at(30) < r["sampled_at"] < _at(90)])
    job = _efficiency(tmp_path, [_job("J", 0, 120, samples_total=7200, flops_total=7.2e15)], kept)["J"]
    assert job["energy_kwh"] == pytest.approx(_kwh(60)) and job["busy_hours"] == pytest.approx(2.0)
    assert job["measured_hours"] == pytest.approx(1.0, abs=10 / 3600)  # one reading period either way
    assert job["avg_power_w"] == pytest.approx(POWER_W, rel=0.01)
    assert job["j_per_sample"] == pytest.approx(POWER_W * 7200 / 7200, rel=0.01)  # 300 W x 7200 s / 7200 samples
    assert job["flops_per_w"] == pytest.approx(7.2e15 / (POWER_W * 7200), rel=0.01)
    con = connect(tmp_path / "w.duckdb", tmp_path / "lake")
    try:
        (per_setting,) = con.execute("SELECT avg_power_w, j_per_sample FROM fct_efficiency_setting_daily").fetchall()
    finally:
        con.close()
    assert per_setting == (pytest.approx(POWER_W, rel=0.01), pytest.approx(POWER_W, rel=0.01))
