"""What the next day's measurement must not claim, on small hand-made lakes built through the
warehouse: a saving for a limit that never bound, a slowdown of 0% for a job whose GPUs run in
step, and an agent's rollback read as a new setting no one audited."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from joulehouse.collectors.writer import write_dataset
from joulehouse.models.efficiency import build_efficiency
from joulehouse.models.outcome import measure_outcomes
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

UTC = dt.timezone.utc
D0 = dt.date(2026, 3, 1)
GPUS = ["GPU-T", "GPU-C1", "GPU-C2", "GPU-C3"]


def _at(day: int, minutes: float) -> dt.datetime:
    return dt.datetime.combine(D0 + dt.timedelta(days=day), dt.time(), UTC) + dt.timedelta(minutes=minutes)


def _measured(tmp_path, profile, jobs, audit, days: int = 4) -> list[dict]:
    """`days` days of 1-minute readings (profile(gpu, day, minute) -> power W, utilisation %, limit W),
    built and measured on the last day: the GPU rows and the pooled one."""
    rows = []
    for index, gpu in enumerate(GPUS):
        counter_j = 0.0
        for day in range(days):
            for minute in range(0, 1440):
                power_w, util, limit_w = profile(gpu, day, minute)
                rows.append(dict(sampled_at=_at(day, minute), host="node-01", gpu_index=index, gpu_uuid=gpu,
                                 gpu_model="NVIDIA A100-SXM4-80GB", power_w=power_w, util_gpu_pct=util,
                                 util_mem_pct=util / 2, energy_mj_total=int(counter_j * 1000), power_limit_w=limit_w,
                                 source="nvml"))
                counter_j += power_w * 60
    lake = tmp_path / "lake"
    write_dataset(lake, "gpu_samples", pa.Table.from_pylist(rows))
    write_dataset(lake, "jobs", pa.Table.from_pylist(jobs))
    write_dataset(lake, "agent_audit", pa.Table.from_pylist(audit))
    con = connect(tmp_path / "w.duckdb", lake)
    for day in range(days):
        build_day(con, D0 + dt.timedelta(days=day), WarehouseSettings(), now=dt.datetime(2026, 4, 1, tzinfo=UTC))
        build_efficiency(con, D0 + dt.timedelta(days=day))
    measure_outcomes(con, D0 + dt.timedelta(days=days - 1))
    cur = con.execute("SELECT * FROM fct_recommendation_outcome ORDER BY scope, gpu_uuid")
    return [dict(zip([c[0] for c in cur.description], r)) for r in cur.fetchall()]


def _job(job_id, gpu, day, hours=24.0, **work):
    return dict(job_id=job_id, host="node-01", gpu_uuid=gpu, started_at=_at(day, 0), ended_at=_at(day, hours * 60),
                team="t", user="u", stage="training", workload_class="throughput", **work)


def _audit(day, action, before_w, after_w, gpu="GPU-T", reason=None):
    return dict(audited_at=_at(day, 0) - dt.timedelta(seconds=30), host="node-01", gpu_uuid=gpu, action=action,
                power_limit_w_before=before_w, power_limit_w_requested=after_w if action == "apply" else None,
                power_limit_w_after=after_w,
                reason=reason or ("set" if action == "apply" else "back to the device default"))


def test_a_limit_the_gpu_never_drew_up_to_is_no_saving(tmp_path):
    """400 -> 300 W on a GPU that never drew over 250 W, its jobs lighter after (no work counter:
    energy per active hour): read as a 40% saving, with an interval of zero width."""
    def profile(gpu, day, minute):
        capped = gpu == "GPU-T" and day >= 2
        return (150.0, 40.0, 300.0) if capped else (250.0, 90.0, 400.0)

    jobs = [_job(f"j-{g}-{d}", g, d) for d in range(4) for g in GPUS]
    [t] = [r for r in _measured(tmp_path, profile, jobs, [_audit(2, "apply", 400.0, 300.0)]) if r["gpu_uuid"] == "GPU-T"]
    assert t["realised_saving_pct"] is None and t["note"].startswith("the new limit never bound: before it the GPU drew "
                                                                     "at most 250 W")


def test_a_job_whose_gpus_run_in_step_has_no_slowdown_of_its_own(tmp_path):
    """A 2-GPU synchronous job on the capped GPU and a control, 10 h before and 11 h after on both:
    the matched jobs read 0% slower (the two slowed alike). Unknown now, and said, with the saving
    an upper bound."""
    def hours(day):
        return 11.0 if day >= 2 else 10.0

    def profile(gpu, day, minute):
        limit_w = 300.0 if gpu == "GPU-T" and day >= 2 else 400.0
        if minute < hours(day) * 60:
            return (300.0 if gpu == "GPU-T" and day >= 2 else 350.0), 90.0, limit_w
        return 60.0, 0.0, limit_w

    jobs = ([_job(f"sync-{d}", g, d, hours(d), flops_total=1e18) for d in range(4) for g in ("GPU-T", "GPU-C1")]
            + [_job(f"solo-{g}-{d}", g, d, hours(d), flops_total=1e18) for d in range(4) for g in ("GPU-C2", "GPU-C3")])
    rows = _measured(tmp_path, profile, jobs, [_audit(2, "apply", 400.0, 300.0)])
    assert {r["method"] for r in rows} == {"matched_jobs"} and len(rows) == 2
    assert all(r["realised_slowdown_pct"] is None and "ran their GPUs in step" in r["note"]
               and "upper bound" in r["note"] and r["realised_saving_pct"] > 0 for r in rows)


@pytest.mark.parametrize("action", ["rollback", "verify-failed"])  # the latter: limit back, clocks would not unlock
def test_an_agent_rollback_is_said_so_not_taken_for_a_new_setting(tmp_path, action):
    """Capped on day 2, rolled back by the agent on day 3: a '300 -> 400 W' setting, 'samples' only."""
    def profile(gpu, day, minute):
        return (300.0, 90.0, 300.0) if gpu == "GPU-T" and day == 2 else (350.0, 90.0, 400.0)

    jobs = [_job(f"j-{g}-{d}", g, d, flops_total=1e18) for d in range(4) for g in GPUS]
    rows = _measured(tmp_path, profile, jobs, [_audit(2, "apply", 400.0, 300.0), _audit(3, action, 300.0, 400.0)])
    assert {(r["power_limit_w_before"], r["power_limit_w_after"]) for r in rows} == {(300.0, 400.0)}
    assert all(r["evidence"] == "agent_audit+samples" and "rolled" in r["note"]
               and "not a recommendation taken" in r["note"] for r in rows)


def _t_row(rows):
    [t] = [r for r in rows if r["gpu_uuid"] == "GPU-T"]
    return t


def test_a_gpu_whose_setting_could_not_be_undone_is_no_control(tmp_path):
    """C1's setting (a lock) failed to read back and could not be undone: audited 'verify-failed',
    its limit unchanged but its clocks perhaps locked (from day 2 it drew 250 W for 0.8 of the
    work). Counted a control, it moved T's saving from 14.3% to 11.0% and its slowdown to -7%."""
    def profile(gpu, day, minute):
        if gpu == "GPU-T" and day >= 2:
            return 300.0, 90.0, 300.0
        return (250.0, 90.0, 400.0) if gpu == "GPU-C1" and day >= 2 else (350.0, 90.0, 400.0)

    jobs = [_job(f"j-{g}-{d}", g, d, flops_total=0.8e18 if g == "GPU-C1" and d >= 2 else 1e18)
            for d in range(4) for g in GPUS]
    audit = [_audit(2, "apply", 400.0, 300.0),
             _audit(2, "verify-failed", 400.0, None, gpu="GPU-C1", reason="undoing it failed: the GPU's limit and "
                                                                           "clocks are not known")]
    t = _t_row(_measured(tmp_path, profile, jobs, audit))
    assert t["n_control_gpus"] == 2
    assert t["realised_saving_pct"] == pytest.approx(100 * (1 - 300 / 350), abs=1e-3)
    assert t["realised_slowdown_pct"] == pytest.approx(0.0, abs=1e-9)


@pytest.mark.slow
def test_the_unit_of_work_is_read_from_the_days_compared_only(tmp_path):
    """A job without FLOPs on T a week before the days compared made the unit active hours: a
    saving of 14.3% for the 4.8% per FLOP, and the slowdown (11.1%) lost."""
    def profile(gpu, day, minute):
        return (300.0, 90.0, 300.0) if gpu == "GPU-T" and day >= 9 else (350.0, 90.0, 400.0)

    jobs = [_job(f"j-{g}-{d}", g, d, flops_total=0.9e18 if g == "GPU-T" and d >= 9 else 1e18)
            for d in range(1, 10) for g in GPUS] + [_job("j-old", "GPU-T", 0)]
    t = _t_row(_measured(tmp_path, profile, jobs, [_audit(9, "apply", 400.0, 300.0)], days=10))
    assert t["outcome_unit"] == "flop"
    assert t["realised_saving_pct"] == pytest.approx(100 * (1 - (300 / 0.9) / 350), abs=1e-3)
    assert t["realised_slowdown_pct"] == pytest.approx(100 * (1 / 0.9 - 1), abs=1e-3)
