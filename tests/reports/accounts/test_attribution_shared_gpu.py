"""Jobs that share one GPU in an hour (time-slicing, MPS): the time none of them held it stays on
the unallocated line, with its energy, capital and embodied carbon."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from joulehouse.reports.accounts.attribution import JOB_COLUMNS, UNALLOCATED, attribute_gpu_hours, group_by_job

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)
AMOUNTS = ["energy_kwh", "embodied_gco2e"]


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def hours_of(*gpus: str) -> pl.DataFrame:
    """One hour (00:00 UTC) of each GPU: 1.2 kWh and 60 gCO2e embodied."""
    return pl.DataFrame([(T0, T0.date(), g, 1.2, 60.0) for g in gpus],
                        schema={"hour_at": pl.Datetime("us", "UTC"), "day": pl.Date, "gpu_uuid": pl.String,
                                "energy_kwh": pl.Float64, "embodied_gco2e": pl.Float64}, orient="row")


def jobs(rows: list[tuple[str, str, float, float]]) -> pl.DataFrame:
    """(job_id, gpu_uuid, start minute, end minute) of the hour."""
    return pl.DataFrame([dict(job_id=j, host="node-01", gpu_uuid=g, started_at=at(a), ended_at=at(b), user="u",
                              team="t", stage="training", flops_total=None) for j, g, a, b in rows],
                        schema=JOB_COLUMNS)


def by_job(hours: pl.DataFrame, job_rows: pl.DataFrame) -> dict[str, dict]:
    out = group_by_job(attribute_gpu_hours(hours, job_rows, AMOUNTS, None, ("embodied_gco2e",)), AMOUNTS)
    return {r["job_id"]: r for r in out.iter_rows(named=True)}


def test_two_jobs_sharing_the_first_half_hour_leave_the_idle_half_unallocated():
    # both held the GPU 00:00-00:30 and nobody 00:30-01:00: each job 0.25 GPU-hours, the idle
    # half 0.5 (it had been 0.5 + 0.5 on the jobs and no idle line)
    rows = by_job(hours_of("g"), jobs([("a", "g", 0, 30), ("b", "g", 0, 30)]))
    assert rows["a"]["gpu_hours"] == pytest.approx(0.25)
    assert rows["b"]["gpu_hours"] == pytest.approx(0.25)
    assert rows[UNALLOCATED]["gpu_hours"] == pytest.approx(0.5)
    assert rows[UNALLOCATED]["energy_kwh"] == pytest.approx(0.6)
    assert rows[UNALLOCATED]["embodied_gco2e"] == pytest.approx(30.0)


def test_overlapping_and_separate_jobs_on_two_gpus_share_only_the_time_held():
    # g1: a 00:00-00:20 and b 00:10-00:30 overlap, c 00:40-00:50 alone: held 40 of 60 minutes by
    # 20 + 20 + 10 job-minutes -> a, b 20/50 x 40/60, c 10/50 x 40/60, idle 20/60.
    # g2: d 00:30-01:00 alone: 0.5, idle 0.5.
    rows = by_job(hours_of("g1", "g2"), jobs([("c", "g1", 40, 50), ("a", "g1", 0, 20), ("b", "g1", 10, 30),
                                               ("d", "g2", 30, 60)]))
    assert rows["a"]["gpu_hours"] == pytest.approx(20 / 50 * 40 / 60)
    assert rows["b"]["gpu_hours"] == pytest.approx(20 / 50 * 40 / 60)
    assert rows["c"]["gpu_hours"] == pytest.approx(10 / 50 * 40 / 60)
    assert rows["d"]["gpu_hours"] == pytest.approx(0.5)
    assert rows[UNALLOCATED]["gpu_hours"] == pytest.approx(20 / 60 + 0.5)
    assert rows["c"]["energy_kwh"] == pytest.approx(1.2 * 10 / 50 * 40 / 60)
    assert sum(r["energy_kwh"] for r in rows.values()) == pytest.approx(2.4)
    assert sum(r["embodied_gco2e"] for r in rows.values()) == pytest.approx(120.0)
