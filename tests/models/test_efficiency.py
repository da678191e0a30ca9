"""Energy per unit of work per job on a simulated day: the job's energy is what the simulated GPU
drew during the job, shares never exceed the hour's energy, and ratios follow from the sums."""

from __future__ import annotations

import datetime as dt

import pytest

from joulehouse.settings import WarehouseSettings
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.models.efficiency import build_efficiency
from outcome_world import NOW, true_job_energy
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

DAY = dt.date(2026, 2, 1)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    root = tmp_path_factory.mktemp("eff")
    s = simulate_fleet(root / "lake", gpus=8, days=1, start=DAY, seed=5, interval_s=60)
    con = connect(root / "w.duckdb", root / "lake")
    build_day(con, DAY, WarehouseSettings(inventory_path=str(s.inventory_path)), now=NOW)
    counts = build_efficiency(con, DAY)
    yield con, root / "lake", counts
    con.close()


def test_job_energy_is_what_the_gpu_drew_during_the_job(warehouse):
    con, lake, counts = warehouse
    truth = true_job_energy(lake)
    rows = con.execute("SELECT job_id, gpu_uuid, energy_kwh FROM fct_job_efficiency WHERE day = ?", [DAY]).fetchall()
    assert counts["fct_job_efficiency"] == len(rows) == len(truth)
    for job, gpu, energy_kwh in rows:
        assert energy_kwh == pytest.approx(truth[(job, gpu)][0], rel=0.02), job


def test_shares_never_exceed_the_gpus_energy_and_ratios_follow_from_the_sums(warehouse):
    con, _, _ = warehouse
    over = con.execute("""
        SELECT j.gpu_uuid, sum(j.energy_kwh) AS jobs_kwh, any_value(e.kwh) AS gpu_kwh
        FROM fct_job_efficiency j JOIN (SELECT gpu_uuid, sum(energy_kwh) AS kwh FROM fct_gpu_energy_hourly GROUP BY 1) e
        USING (gpu_uuid) GROUP BY 1 HAVING sum(j.energy_kwh) > any_value(e.kwh) * 1.0001""").fetchall()
    assert over == []
    for req, tok, smp, flops, kwh, epoe, jpt, jps, fpw in con.execute(
            "SELECT requests_total, tokens_total, samples_total, flops_total, energy_kwh, requests_per_kwh, "
            "j_per_token, j_per_sample, flops_per_w FROM fct_job_efficiency").fetchall():
        assert (epoe is None) == (req is None) and (jps is None) == (smp is None)
        if req is not None:
            assert epoe == pytest.approx(req / kwh) and jpt == pytest.approx(kwh * 3.6e6 / tok)
        assert fpw == pytest.approx(flops / (kwh * 3.6e6))
    by_setting = con.execute("SELECT sum(energy_kwh) FROM fct_efficiency_setting_daily WHERE day = ?", [DAY]).fetchone()[0]
    by_job = con.execute("SELECT sum(energy_kwh) FROM fct_job_efficiency WHERE day = ?", [DAY]).fetchone()[0]
    assert by_setting == pytest.approx(by_job)


def test_rebuilding_a_day_replaces_its_rows(warehouse):
    con, _, counts = warehouse
    assert build_efficiency(con, DAY) == counts
