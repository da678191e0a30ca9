"""Job efficiency on lakes written by hand, where the answer is known: the work of the part of a
run the energy was measured over, work counts that are no counts, requeued runs that overlap or
change their batch. One GPU at a steady 300 W read every 10 s; 0.3 kWh an hour."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from joulehouse.collectors.writer import write_dataset
from joulehouse.models.efficiency import build_efficiency
from joulehouse.models.efficiency_precision import precision_efficiency_day
from joulehouse.reports.page.section_actions import efficiency_by_model_and_limit
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

UTC = dt.timezone.utc
DAY = dt.date(2026, 1, 2)
MIDNIGHT = dt.datetime(2026, 1, 2, tzinfo=UTC)
NOW = dt.datetime(2026, 1, 20, tzinfo=UTC)
H100 = "NVIDIA H100 80GB HBM3"


def _at(minutes: float) -> dt.datetime:
    return MIDNIGHT + dt.timedelta(minutes=minutes)


def _readings(skip=lambda s: False) -> list[dict]:
    return [dict(sampled_at=MIDNIGHT + dt.timedelta(seconds=s), host="node-01", gpu_index=0, gpu_uuid="GPU-0",
                 gpu_model=H100, power_w=300.0, power_limit_w=700.0, source="nvml")
            for s in range(0, 3601, 10) if not skip(s)]


def _job(job_id: str, start: float, end: float, **work) -> dict:
    return dict(job_id=job_id, host="node-01", gpu_uuid="GPU-0", started_at=_at(start), ended_at=_at(end), team="t",
                stage="training", workload_class="throughput", **work)


def _built(tmp_path, readings: list[dict], jobs: list[dict]):
    lake = tmp_path / "lake"
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(readings))
    write_dataset(lake, "jobs", pa.Table.from_pylist(jobs))
    con = connect(tmp_path / "w.duckdb", lake)
    build_day(con, DAY, WarehouseSettings(), now=NOW)
    build_efficiency(con, DAY)
    precision_efficiency_day(con, DAY)
    return con


def _one(con, sql: str):
    return con.execute(sql).fetchall()[0]  # fetchall: an unfinished result blocks the next query


def test_every_reader_sets_the_measured_energy_against_the_measured_part_of_the_work(tmp_path):
    """20 of 60 minutes unread: fct_job_efficiency said 300 J/token, the precision table, the FLOPs
    per watt, the page and the dashboard 200 (the energy of 40 minutes against an hour's work)."""
    con = _built(tmp_path, _readings(skip=lambda s: 1200 < s < 2400),
                 [_job("j", 0, 60, tokens_total=3600, flops_total=3.6e18, precision="fp16", batch_size=8)])
    assert _one(con, "SELECT j_per_token FROM fct_job_efficiency") == (pytest.approx(300.0),)
    assert _one(con, "SELECT j_per_unit, avg_power_w FROM fct_efficiency_precision_daily WHERE work_unit = 'token'") \
        == (pytest.approx(300.0), pytest.approx(300.0))
    flops_per_w = 3.6e18 / (0.3 * 3.6e6)  # an hour's FLOPs over an hour's energy at 300 W
    assert _one(con, "SELECT fp16_equivalent_flops_per_w FROM fct_flops_per_watt_daily WHERE gpu_model <> 'fleet'") \
        == (pytest.approx(flops_per_w),)
    page = efficiency_by_model_and_limit(con.sql("SELECT * FROM fct_job_efficiency").pl())
    assert page["j_per_token"].to_list() == [pytest.approx(300.0)]
    from joulehouse.reports.dashboard.render import SQL as DASHBOARD

    assert con.execute(DASHBOARD.text("dashboard_work_efficiency")).fetchall()[0][2] == pytest.approx(300.0)


def test_a_work_count_of_zero_or_less_is_none_reported(tmp_path):
    """A negative count gave -1,080,000 J/token and cancelled its group's FLOPs (0 FLOP/W)."""
    con = _built(tmp_path, _readings(), [_job("good", 0, 30, tokens_total=1000, flops_total=1e18),
                                         _job("bad", 30, 60, tokens_total=-1, requests_total=0, flops_total=-1e18)])
    bad = _one(con, "SELECT tokens_total, requests_total, j_per_token, requests_per_kwh, flops_per_w "
                    "FROM fct_job_efficiency WHERE job_id = 'bad'")
    assert bad == (None, None, None, None, None)
    good_j_per_token = 0.15 * 3.6e6 / 1000
    assert _one(con, "SELECT j_per_token, flops_per_w FROM fct_efficiency_setting_daily") == (
        pytest.approx(good_j_per_token), pytest.approx(1e18 / (0.15 * 3.6e6)))


def test_overlapping_requeued_runs_hold_the_gpu_once(tmp_path):
    """[0, 40) and [30, 60) min: 1.17 busy hours for an hour held, 180 J/token for 154."""
    con = _built(tmp_path, _readings(), [_job("r", 0, 40, tokens_total=4000), _job("r", 30, 60, tokens_total=3000)])
    assert _one(con, "SELECT busy_hours, j_per_token FROM fct_job_efficiency") == (
        pytest.approx(1.0), pytest.approx(0.3 * 3.6e6 / 7000))


def test_a_job_requeued_at_another_batch_counts_once_in_the_precision_tables(tmp_path):
    """One row per (precision, batch) of its runs, each carrying the whole job: 0.5 kWh for 0.25."""
    con = _built(tmp_path, _readings(), [_job("r", 0, 20, tokens_total=1200, flops_total=1.2e18, precision="fp16", batch_size=8),
                                         _job("r", 30, 60, tokens_total=1800, flops_total=1.8e18, precision="bf16", batch_size=16)])
    energy = _one(con, "SELECT energy_kwh FROM fct_job_efficiency")[0]
    rows = con.execute("SELECT \"precision\", batch_size, n_jobs, energy_kwh FROM fct_efficiency_precision_daily "
                       "WHERE work_unit = 'token'").fetchall()
    assert rows == [("not reported", None, 1, pytest.approx(energy))]
    assert _one(con, "SELECT n_jobs, energy_kwh FROM fct_flops_per_watt_daily WHERE gpu_model = 'fleet'") == (
        1, pytest.approx(energy))
