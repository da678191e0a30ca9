"""Efficiency by precision and batch, and FP16-equivalent FLOPs per watt, on simulated days whose
truth is known in shape (collectors.sim.precision): a serving job's tokens per joule follow its
batch and precision, a training job's samples per joule its batch; every job states its precision,
and serving, training and evaluation jobs their batch."""

from __future__ import annotations

import datetime as dt

import pytest

from joulehouse.collectors.sim import simulate_fleet
from joulehouse.models.efficiency import build_efficiency
from joulehouse.models.efficiency_precision import fp16_factor, precision_efficiency_day
from joulehouse.models.gpu_catalogue import lookup
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

DAYS = (dt.date(2026, 2, 1), dt.date(2026, 2, 2))
NOW = dt.datetime(2026, 2, 10, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    root = tmp_path_factory.mktemp("eff_precision")
    s = simulate_fleet(root / "lake", gpus=32, days=2, start=DAYS[0], seed=3, interval_s=60)
    con = connect(root / "w.duckdb", root / "lake")
    for day in DAYS:
        build_day(con, day, WarehouseSettings(inventory_path=str(s.inventory_path)), now=NOW)
        build_efficiency(con, day)
        precision_efficiency_day(con, day)
    yield con
    con.close()


def test_fp16_equivalent_factors_follow_the_datasheet_peaks():
    a100, h100 = lookup("NVIDIA A100-SXM4-80GB"), lookup("NVIDIA H100 80GB HBM3")
    assert fp16_factor(h100, "fp8") == pytest.approx(0.5) and fp16_factor(h100, "bf16") == 1.0
    assert fp16_factor(a100, "fp8") == 1.0, "no FP8 units on Ampere: it runs as FP16"
    assert fp16_factor(a100, "tf32") == pytest.approx(2.0) and fp16_factor(a100, "int4") == pytest.approx(0.25)
    assert fp16_factor(h100, "int4") == pytest.approx(0.5), "Hopper has no INT4 units: it runs as INT8"
    assert fp16_factor(h100, "fp32") == pytest.approx(989.5 / 67)


@pytest.mark.slow  # a simulated 32-GPU fleet over two days, built and measured
@pytest.mark.parametrize("unit", ["token", "sample"])  # serving, and training with evaluation
def test_the_best_batch_has_the_highest_eta_and_the_other_batches_save_at_it(warehouse, unit):
    rows = warehouse.execute("""SELECT day, gpu_model, "precision", batch_size, j_per_unit, eta_units_per_j, best_batch_size,
                                       saving_kwh_per_day FROM fct_efficiency_precision_daily
                                WHERE work_unit = ? AND batch_size IS NOT NULL""", [unit]).fetchall()
    assert rows, f"no {unit} rows with a batch"
    groups: dict = {}
    for day, model, precision, batch, j, eta, best, saving in rows:
        groups.setdefault((day, model, precision), []).append((batch, eta, best, saving))
        assert j * eta == pytest.approx(1.0, rel=1e-9), "eta = throughput / power = units per joule"
    checked = 0
    for entries in groups.values():
        if len(entries) < 2:
            continue
        top = max(entries, key=lambda e: e[1])
        assert all(e[2] == top[0] for e in entries), "the best batch is the one with the highest eta"
        assert top[3] == 0 and all(e[3] >= 0 for e in entries)
        checked += 1
    assert checked >= 1


@pytest.mark.slow  # a simulated 32-GPU fleet over two days, built and measured
def test_the_saving_the_jobs_spread_supports_is_recomputed_from_the_jobs(warehouse):
    """j_per_unit_se from each job's energy and samples (a multi-GPU job's GPUs summed), by hand;
    the supported saving never exceeds the point saving and is NULL only where a side has one job."""
    import math
    from collections import defaultdict

    day = DAYS[1]
    per_job: dict = defaultdict(lambda: [0.0, 0.0])
    for model, precision, batch, job, e_kwh, samples in warehouse.execute(
            """WITH j AS (SELECT DISTINCT job_id, gpu_uuid, "precision", batch_size FROM eff_input_jobs)
               SELECT e.gpu_model, j."precision", j.batch_size, e.job_id, e.energy_kwh, e.samples_total
               FROM fct_job_efficiency e JOIN j USING (job_id, gpu_uuid)
               WHERE e.day = ? AND e.samples_total > 0 AND e.energy_kwh > 0 AND e.busy_hours > 0
                 AND j.batch_size IS NOT NULL""", [day]).fetchall():
        per_job[(model, precision, batch, job)][0] += e_kwh * 3.6e6
        per_job[(model, precision, batch, job)][1] += samples
    groups: dict = defaultdict(list)
    for (model, precision, batch, _), eu in per_job.items():
        groups[(model, precision, batch)].append(eu)
    table = {r[:3]: r[3:] for r in warehouse.execute(
        """SELECT gpu_model, "precision", batch_size, j_per_unit_se, saving_kwh_per_day, saving_low_kwh_per_day,
                  best_batch_size FROM fct_efficiency_precision_daily
           WHERE day = ? AND work_unit = 'sample' AND batch_size IS NOT NULL""", [day]).fetchall()}
    assert table.keys() == groups.keys()
    checked = 0
    for key, jobs in groups.items():
        se, saving, low, best = table[key]
        if len(jobs) < 2:
            assert se is None
            continue
        r = sum(e for e, _ in jobs) / sum(u for _, u in jobs)
        want = math.sqrt(len(jobs) / (len(jobs) - 1) * sum((e - r * u) ** 2 for e, u in jobs)) / sum(u for _, u in jobs)
        assert se == pytest.approx(want, rel=1e-6), key
        checked += 1
        best_single = len(groups[(key[0], key[1], best)]) < 2
        if key[2] == best:
            assert low == 0.0
        elif best_single:
            assert low is None
        else:
            assert low is not None and 0.0 <= low <= saving + 1e-12
    assert checked >= 5
    point, supported = warehouse.execute("""SELECT sum(saving_kwh_per_day), sum(saving_low_kwh_per_day)
                                            FROM fct_efficiency_precision_daily WHERE work_unit = 'sample'""").fetchone()
    assert 0 <= supported < point, "training jobs differ in work: the spread takes back part of the point saving"


@pytest.mark.slow  # a simulated 32-GPU fleet over two days, built and measured
def test_training_states_its_batch_and_data_preparation_does_not(warehouse):
    by_stage = dict(warehouse.execute("""SELECT stage, count(*) FILTER (WHERE batch_size IS NULL) FROM eff_input_jobs
                                         GROUP BY stage""").fetchall())
    assert by_stage["training"] == 0 and by_stage["evaluation"] == 0 and by_stage["inference"] == 0
    assert by_stage["data-preparation"] > 0


@pytest.mark.slow  # a simulated 32-GPU fleet over two days, built and measured
def test_flops_per_watt_is_sustained_and_measured_against_the_first_day(warehouse):
    rows = {(r[0], r[1]): r[2:] for r in warehouse.execute(
        """SELECT day, gpu_model, fp16_equivalent_flops_per_w, peak_fp16_flops_per_w, avg_temp_c, first_day,
                  gain_vs_first_day_pct, goal_flops_per_w, precision_reported_ratio
           FROM fct_flops_per_watt_daily""").fetchall()}
    first, second = DAYS
    fleet1, fleet2 = rows[(first, "fleet")], rows[(second, "fleet")]
    assert fleet1[3] == first and fleet1[4] == pytest.approx(0.0) and fleet2[3] == first
    assert fleet2[4] == pytest.approx(100 * (fleet2[0] / fleet1[0] - 1))
    assert fleet2[5] == pytest.approx(1.2 * fleet1[0])
    h100 = rows[(second, "NVIDIA H100 80GB HBM3")]
    assert 0 < h100[0] < h100[1], "sustained is below the datasheet peak per watt"
    assert 30 < h100[2] < 90 and h100[6] == pytest.approx(1.0)


@pytest.mark.slow  # a simulated 32-GPU fleet over two days, built and measured
def test_the_report_states_the_best_batch_and_the_fleet_flops_per_watt(warehouse, tmp_path):
    import html

    from joulehouse.reports.page.render import render_report

    text = html.unescape(render_report(warehouse, DAYS[1], tmp_path / "r.html").read_text())
    per_w, gain, temp = warehouse.execute("SELECT fp16_equivalent_flops_per_w, gain_vs_first_day_pct, avg_temp_c "
                                          "FROM fct_flops_per_watt_daily WHERE day = ? AND gpu_model = 'fleet'",
                                          [DAYS[1]]).fetchone()
    assert f"Fleet: {per_w / 1e9:,.1f} GFLOP/s per W, {gain:,.1f}% since {DAYS[0]} against the goal of +20%" in text
    assert f"mean chip temperature of {temp:,.1f} °C" in text
    assert "By precision and batch size" in text and "fct_efficiency_precision_daily" in text
