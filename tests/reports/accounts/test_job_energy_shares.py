"""The accounts split a GPU-hour's energy-driven amounts (energy, operational carbon, energy cost)
among its jobs by what the GPU drew in each job's window, and its calendar amounts (capital,
operations, embodied carbon) by time held. Before, everything went by time held: a job that ran
the GPU at 700 W for half an hour, idle at 60 W for the other half, was charged half of the
hour's 380 Wh (190 Wh) and the idle line the other half, where the job drew 350 Wh."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from joulehouse.collectors.writer import write_dataset
from joulehouse.models.efficiency import build_efficiency
from joulehouse.reports.accounts.carbon import carbon_day
from joulehouse.reports.accounts.tco import tco_day
from joulehouse.settings import CarbonSettings, TcoSettings, WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

UTC = dt.timezone.utc
DAY = dt.date(2026, 1, 2)
MIDNIGHT = dt.datetime(2026, 1, 2, tzinfo=UTC)
NOW = dt.datetime(2026, 1, 10, tzinfo=UTC)
BUSY_W, IDLE_W = 700.0, 60.0


def _power_w(s: int) -> float:
    """The job runs 00:00-00:30 and 01:00-01:15; the GPU idles otherwise (two hours read)."""
    return BUSY_W if s < 1800 or 3600 <= s < 4500 else IDLE_W


def _world(root, *, efficiency: bool):
    lake = root / "lake"
    rows, counter_mj = [], 0
    for s in range(0, 7201):
        if s:
            counter_mj += round((_power_w(s - 1) + _power_w(s)) / 2 * 1000)
        rows.append(dict(sampled_at=MIDNIGHT + dt.timedelta(seconds=s), host="node-01", gpu_index=0,
                         gpu_uuid="GPU-0", gpu_model="NVIDIA H100 80GB HBM3", power_w=_power_w(s),
                         energy_mj_total=10**9 + counter_mj, power_limit_w=700.0, source="nvml"))
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))
    job = dict(job_id="train-1", host="node-01", gpu_uuid="GPU-0", team="vision", user="ana", stage="training",
               workload_class="throughput", deferrable=True)
    write_dataset(lake, "jobs", pa.Table.from_pylist([
        {**job, "started_at": MIDNIGHT, "ended_at": MIDNIGHT + dt.timedelta(minutes=30)},
        {**job, "started_at": MIDNIGHT + dt.timedelta(hours=1), "ended_at": MIDNIGHT + dt.timedelta(minutes=75)}]))
    con = connect(root / "w.duckdb", lake)
    build_day(con, DAY, WarehouseSettings(), now=NOW)
    if efficiency:
        build_efficiency(con, DAY)
    carbon = carbon_day(con, DAY, CarbonSettings(), None)
    cost = tco_day(con, DAY, TcoSettings(), None)
    return con, carbon, cost


def _rows(con, table: str, columns: str) -> dict[str, tuple]:
    return {r[0]: r[1:] for r in con.execute(f"SELECT job_id, {columns} FROM {table} WHERE day = ?", [DAY]).fetchall()}


def test_a_jobs_energy_is_what_the_gpu_drew_while_it_ran(tmp_path):
    con, carbon, cost = _world(tmp_path, efficiency=True)
    try:
        job_wh = (BUSY_W * 1800 + BUSY_W * 900) / 3600  # 525 Wh
        idle_wh = IDLE_W * (7200 - 2700) / 3600  # 75 Wh
        energy = _rows(con, "rpt_carbon_daily", "gpu_energy_kwh * 1000, gpu_hours, embodied_gco2e, location_gco2e")
        assert energy["train-1"][0] == pytest.approx(job_wh, rel=2e-3)
        assert energy["unallocated"][0] == pytest.approx(idle_wh, rel=2e-2)
        # calendar amounts stay by time held: 0.75 of 2 read GPU-hours (and 22 unread hours idle)
        assert energy["train-1"][1] == pytest.approx(0.75)
        per_gpu_hour = (energy["train-1"][2] + energy["unallocated"][2]) / 24
        assert energy["train-1"][2] == pytest.approx(0.75 * per_gpu_hour, rel=1e-9)
        # operational carbon follows the energy (one intensity for the day: the default)
        assert energy["train-1"][3] / energy["unallocated"][3] == pytest.approx(job_wh / idle_wh, rel=2e-2)
        costs = _rows(con, "rpt_tco_daily", "energy_cost_usd, capital_usd")
        assert costs["train-1"][0] / costs["unallocated"][0] == pytest.approx(job_wh / idle_wh, rel=2e-2)
        assert costs["train-1"][1] / (costs["train-1"][1] + costs["unallocated"][1]) == pytest.approx(0.75 / 24)
        # the accounts and the efficiency table tell the job's energy alike
        eff = con.execute("SELECT energy_kwh * 1000 FROM fct_job_efficiency WHERE job_id = 'train-1'").fetchone()[0]
        assert eff == pytest.approx(energy["train-1"][0], rel=1e-9)
        assert carbon.energy_kwh == pytest.approx(cost.energy_kwh)
        # and the time-shifting estimate moves the energy the job drew
        it_kwh = _rows(con, "rpt_carbon_daily", "energy_kwh")["train-1"][0]
        shifted = con.execute("SELECT sum(energy_kwh) FROM rpt_shift_carbon_daily WHERE job_id = 'train-1'").fetchone()[0]
        assert shifted == pytest.approx(it_kwh, rel=1e-9)
    finally:
        con.close()


def test_without_the_efficiency_step_the_split_is_by_time_and_says_so(tmp_path):
    con, carbon, _ = _world(tmp_path, efficiency=False)
    try:
        energy = _rows(con, "rpt_carbon_daily", "gpu_energy_kwh * 1000")
        total_wh = energy["train-1"][0] + energy["unallocated"][0]
        # hour 0: half of (350 + 30) Wh; hour 1: a quarter of (175 + 45) Wh
        assert energy["train-1"][0] == pytest.approx(380 / 2 + 220 / 4, rel=2e-3)
        assert total_wh == pytest.approx(600, rel=2e-3)
        assert any("energy split among jobs by time held" in n for n in carbon.notes)
    finally:
        con.close()


def _shared_gpu_world(root, **bound):
    """GPU-0 draws 300 W for an hour, held all along by two pods: `long-1`, started 10 days
    before DAY (its row lies in that date= partition of the lake), and `new-1`, started the day
    before. `bound`: job_max_days for both the efficiency step and the accounts (default: theirs)."""
    lake = root / "lake"
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist([
        dict(sampled_at=MIDNIGHT + dt.timedelta(seconds=s), host="node-01", gpu_index=0, gpu_uuid="GPU-0",
             gpu_model="NVIDIA H100 80GB HBM3", power_w=300.0, energy_mj_total=10**9 + s * 300_000,
             power_limit_w=700.0, source="nvml") for s in range(0, 3601)]))
    job = dict(host="node-01", gpu_uuid="GPU-0", user="ana", stage="training", workload_class="throughput",
               ended_at=MIDNIGHT + dt.timedelta(days=2))
    write_dataset(lake, "jobs", pa.Table.from_pylist([
        {**job, "job_id": "long-1", "team": "llm", "started_at": MIDNIGHT - dt.timedelta(days=10)},
        {**job, "job_id": "new-1", "team": "vision", "started_at": MIDNIGHT - dt.timedelta(days=1)}]))
    con = connect(root / "w.duckdb", lake)
    build_day(con, DAY, WarehouseSettings(), now=NOW)
    build_efficiency(con, DAY, **bound)
    carbon_day(con, DAY, CarbonSettings(), None, **bound)
    return con


def test_a_job_started_ten_days_before_gets_its_share_of_a_gpu_hour_it_shares(tmp_path):
    # Before, the efficiency step looked 7 days back only: the hour was measured without long-1,
    # new-1 was charged all 300 Wh and long-1, which the accounts still saw, nothing.
    con = _shared_gpu_world(tmp_path)
    try:
        measured = dict(con.execute("SELECT job_id, energy_share_ratio FROM fct_job_energy_hourly WHERE day = ?",
                                    [DAY]).fetchall())
        assert measured == pytest.approx({"long-1": 0.5, "new-1": 0.5})
        energy = _rows(con, "rpt_carbon_daily", "gpu_energy_kwh * 1000")
        assert energy["long-1"][0] == pytest.approx(150.0, rel=1e-3)
        assert energy["new-1"][0] == pytest.approx(150.0, rel=1e-3)
        gpu_wh = con.execute("SELECT sum(energy_kwh) * 1000 FROM fct_gpu_energy_hourly WHERE day = ?", [DAY]).fetchone()[0]
        assert energy["long-1"][0] + energy["new-1"][0] == pytest.approx(gpu_wh, rel=1e-9)
        assert energy.get("unallocated", (0.0,))[0] == pytest.approx(0.0, abs=1e-9)
    finally:
        con.close()


def test_a_job_started_before_the_bound_is_left_out_of_the_shares_and_the_accounts_alike(tmp_path):
    # models.job_max_days bounds the partitions read; the efficiency step and the accounts apply
    # the same bound, so a GPU-hour is never measured without a job the accounts then charge nothing
    con = _shared_gpu_world(tmp_path, job_max_days=5)
    try:
        measured = dict(con.execute("SELECT job_id, energy_share_ratio FROM fct_job_energy_hourly WHERE day = ?",
                                    [DAY]).fetchall())
        assert measured == pytest.approx({"new-1": 1.0})
        energy = _rows(con, "rpt_carbon_daily", "gpu_energy_kwh * 1000")
        assert "long-1" not in energy
        assert energy["new-1"][0] == pytest.approx(300.0, rel=1e-3)
    finally:
        con.close()
