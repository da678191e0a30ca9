"""Attribution of GPU-hours to jobs: conservation, overlap, idle policies (property tests)."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joulehouse.reports.accounts.attribution import UNALLOCATED, attribute_gpu_hours, group_by_job, split_valid_jobs, spread_unallocated

UTC = dt.timezone.utc
DAY = dt.date(2026, 3, 2)
T0 = dt.datetime(2026, 3, 2, tzinfo=UTC)
AMOUNTS = ["energy_kwh", "carbon_gco2e"]


def gpu_hours(energies: dict[str, list[float]]) -> pl.DataFrame:
    rows = [(T0 + dt.timedelta(hours=h), DAY, uuid, e, e * 50.0)
            for uuid, es in energies.items() for h, e in enumerate(es)]
    return pl.DataFrame(rows, schema={"hour_at": pl.Datetime("us", "UTC"), "day": pl.Date, "gpu_uuid": pl.String,
                                      "energy_kwh": pl.Float64, "carbon_gco2e": pl.Float64}, orient="row")


def jobs(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(
        [(j, "node-01", g, T0 + dt.timedelta(hours=a), T0 + dt.timedelta(hours=b), "u", team, "training", None)
         for j, g, a, b, team in rows],
        schema={"job_id": pl.String, "host": pl.String, "gpu_uuid": pl.String, "started_at": pl.Datetime("us", "UTC"),
                "ended_at": pl.Datetime("us", "UTC"), "user": pl.String, "team": pl.String, "stage": pl.String,
                "flops_total": pl.Float64}, orient="row")


def test_job_gets_its_seconds_share_and_the_rest_is_unallocated():
    out = group_by_job(attribute_gpu_hours(gpu_hours({"g": [1.0, 1.0]}), jobs([("j", "g", 0.25, 1.0, "t")]), AMOUNTS), AMOUNTS)
    by_job = {r["job_id"]: r for r in out.iter_rows(named=True)}
    assert by_job["j"]["energy_kwh"] == pytest.approx(0.75)
    assert by_job[UNALLOCATED]["energy_kwh"] == pytest.approx(1.25)
    assert by_job[UNALLOCATED]["gpu_hours"] == pytest.approx(1.25)


def test_overlapping_jobs_on_one_gpu_never_count_an_hour_twice():
    out = attribute_gpu_hours(gpu_hours({"g": [2.0]}), jobs([("a", "g", 0, 1, "t"), ("b", "g", 0, 1, "t")]), AMOUNTS)
    assert out["gpu_hours"].sum() == pytest.approx(1.0)
    assert out.filter(pl.col("job_id") == "a")["energy_kwh"][0] == pytest.approx(1.0)
    assert out.filter(pl.col("job_id") == UNALLOCATED).height == 0


def test_job_that_ends_before_it_starts_is_set_aside_with_a_reason():
    valid, bad = split_valid_jobs(jobs([("ok", "g", 0, 1, "t"), ("bad", "g", 2, 1, "t")]))
    assert valid["job_id"].to_list() == ["ok"]
    assert bad["reason"].to_list() == ["ended_at is not after started_at"]


interval = st.tuples(st.floats(-2, 26), st.floats(0.01, 10))


@settings(max_examples=60, deadline=None)
@given(
    energies=st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=24),
    spans=st.lists(st.tuples(st.sampled_from(["g1", "g2"]), interval, st.sampled_from(["t1", "t2"])), max_size=6),
    proportional=st.booleans(),
)
def test_attributed_totals_equal_metered_totals(energies, spans, proportional):
    hours = gpu_hours({"g1": energies, "g2": energies[::-1]})
    job_rows = [(f"j{i}", g, a, a + d, team) for i, (g, (a, d), team) in enumerate(spans)]
    grouped = group_by_job(attribute_gpu_hours(hours, jobs(job_rows), AMOUNTS), AMOUNTS)
    if proportional:
        grouped = spread_unallocated(grouped, AMOUNTS)
    for col in AMOUNTS:
        assert grouped[col].sum() == pytest.approx(hours[col].sum(), rel=1e-9, abs=1e-9)
    assert grouped["gpu_hours"].sum() == pytest.approx(hours.height, rel=1e-9)
    assert (grouped["gpu_hours"] >= -1e-12).all()
    if proportional and grouped.filter(pl.col("job_id") != UNALLOCATED).height:
        assert grouped.filter(pl.col("job_id") == UNALLOCATED)["energy_kwh"].sum() == 0.0


def shares(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame([(T0 + dt.timedelta(hours=h), g, j, r) for h, g, j, r in rows],
                        schema={"hour_at": pl.Datetime("us", "UTC"), "gpu_uuid": pl.String, "job_id": pl.String,
                                "energy_share_ratio": pl.Float64}, orient="row")


def test_a_gpu_hour_measured_without_one_of_its_jobs_goes_by_time_not_zero_for_that_job():
    # hour 0 was measured for "new" only (the models missed "old"); hour 1 for both. Before, "old"
    # got 0 of hour 0 and "new" all of it.
    held = jobs([("old", "g", -240, 2, "t"), ("new", "g", -1, 2, "t")])
    measured = shares([(0, "g", "new", 1.0), (1, "g", "new", 0.8), (1, "g", "old", 0.2)])
    out = attribute_gpu_hours(gpu_hours({"g": [3.0, 2.0]}), held, AMOUNTS, measured)
    energy = {(r["hour_at"].hour, r["job_id"]): r["energy_kwh"] for r in out.iter_rows(named=True)}
    assert energy[(0, "old")] == pytest.approx(1.5) and energy[(0, "new")] == pytest.approx(1.5)
    assert energy[(1, "old")] == pytest.approx(0.4) and energy[(1, "new")] == pytest.approx(1.6)
    # the jobs of each GPU-hour sum to its energy, nothing left unallocated or counted twice
    assert out.group_by("hour_at").agg(pl.col("energy_kwh").sum()).sort("hour_at")["energy_kwh"].to_list() \
        == pytest.approx([3.0, 2.0])
    assert out.filter(pl.col("job_id") == UNALLOCATED)["energy_kwh"].sum() == pytest.approx(0.0, abs=1e-12)


def test_the_proportional_policy_moves_amounts_but_not_the_unread_part_of_the_gpu_hours():
    """gpu_hours stays on the idle line; its part unmetered_gpu_hours moved onto the jobs, so a job
    that held 1 metered GPU-hour reported 24 unread ones."""
    day = dt.date(2026, 3, 2)
    keys = dict(day=[day, day], team=["t", UNALLOCATED], user=["u", UNALLOCATED], job_id=["j1", UNALLOCATED],
                stage=["training", "idle"])
    grouped = pl.DataFrame({**keys, "gpu_hours": [1.0, 47.0], "energy_kwh": [0.5, 11.5],
                            "unmetered_gpu_hours": [0.0, 24.0]})
    spread = {r["job_id"]: r for r in spread_unallocated(grouped, ["energy_kwh", "unmetered_gpu_hours"]).iter_rows(named=True)}
    assert spread["j1"]["energy_kwh"] == pytest.approx(12.0) and spread[UNALLOCATED]["energy_kwh"] == 0.0
    assert (spread["j1"]["gpu_hours"], spread["j1"]["unmetered_gpu_hours"]) == (1.0, 0.0)
    assert (spread[UNALLOCATED]["gpu_hours"], spread[UNALLOCATED]["unmetered_gpu_hours"]) == (47.0, 24.0)
