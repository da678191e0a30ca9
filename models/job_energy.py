"""A job's energy on another GPU model, predicted from its telemetry on the one it ran on (kWh).

The job's profile is its per-sample activity, DRAM activity, PCIe traffic, relative SM clock
(f / f_max of the model it ran on) and chip temperature. The target model's fitted power model
(fct_power_model, the latest fit on or before the day) turns each sample into the target's power,
capped at the target's power limit, and the sum of power x interval is the predicted energy.

What is assumed (and is the error's source when wrong): the same kernels keep the target's SMs and
memory as busy as the source's, at the same relative clock; the run takes `time_scale` times the
source's time (1.0: the same profile for the same time, as when a service or a fixed-length run
moves; for a fixed amount of work pass source throughput / target throughput); the chip runs
at the source's temperature (the leakage term is small next to the dynamic one).

`job_energy_day(con, day, pairs)` checks the prediction where the same profile ran on two models
(pairs of job ids; `same_profile_pairs` finds them by a shared job-id prefix, as the simulator's
cross-model runs have) and writes fct_job_energy_prediction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from joulehouse.models.activity import create_activity_view
from joulehouse.models.power import JOBS_RELATIONS, load_fit
from joulehouse.warehouse.sqlio import quoted_relation, records, relation_exists, replace_day_rows
from joulehouse.models.sql import load_sql

MAX_SAMPLE_INTERVAL_S = 60.0


@dataclass(frozen=True)
class JobEnergyPrediction:
    """One job predicted on another model, checked against that model's run of the same profile."""

    day: dt.date
    job_id: str
    from_gpu_model: str
    to_gpu_model: str
    target_job_id: str | None
    predicted_energy_kwh: float
    measured_energy_kwh: float | None
    source_energy_kwh: float
    error_pct: float | None
    time_scale: float


def _prepare(con: duckdb.DuckDBPyConnection, day: dt.date, to_models: Sequence[str]) -> None:
    jobs_relation = next((name for name in JOBS_RELATIONS if relation_exists(con, name)), None)
    if jobs_relation is None:
        raise ValueError(f"no jobs relation (one of {JOBS_RELATIONS}) in the warehouse: job energy needs jobs")
    con.execute(f"CREATE OR REPLACE TEMP VIEW job_energy_input_jobs AS SELECT * FROM {quoted_relation(jobs_relation)}")
    con.execute("CREATE OR REPLACE TEMP TABLE job_energy_targets (gpu_model VARCHAR, static_w DOUBLE, "
                "temp_w_per_c DOUBLE, dyn_w DOUBLE, dyn_freq_exponent DOUBLE, activity_exponent DOUBLE, "
                "mem_w DOUBLE, pcie_w_per_gbps DOUBLE, power_limit_w DOUBLE)")
    for model in to_models:
        fit = load_fit(con, model, day)
        if fit is None or fit.get("static_w") is None:
            raise ValueError(f"GPU model {model!r} has no fitted power model on or before {day} (fct_power_model)")
        limit = con.execute("SELECT max(power_limit_w) FROM stg_gpu_samples WHERE day = ? AND gpu_model = ?",
                            [day, model]).fetchone()[0]
        con.execute("INSERT INTO job_energy_targets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [model, fit["static_w"], fit["temp_w_per_c"], fit["dyn_w"], fit["dyn_freq_exponent"],
                     fit.get("activity_exponent"), fit["mem_w"], fit["pcie_w_per_gbps"], limit])


def predict_job_energy(con: duckdb.DuckDBPyConnection, day: dt.date, job_ids: Sequence[str],
                       to_models: Sequence[str], *, time_scale: float = 1.0) -> list[dict]:
    """Rows (job_id, from_gpu_model, to_gpu_model, n_gpus, duration_s, source_energy_kwh,
    predicted_energy_kwh) for each job of `day` in `job_ids` on each model of `to_models`."""
    if time_scale <= 0:
        raise ValueError(f"time_scale={time_scale}: expected a positive ratio of run times")
    _prepare(con, day, to_models)
    create_activity_view(con, day)
    return records(con.execute(load_sql("job_energy_prediction"), {
        "day": day, "job_ids": list(job_ids), "max_interval_s": MAX_SAMPLE_INTERVAL_S, "time_scale": time_scale}))


def same_profile_pairs(con: duckdb.DuckDBPyConnection, day: dt.date, profile: str) -> list[tuple[str, str]]:
    """Ordered pairs (source job, target job) of `day` whose job ids start with `profile` and that
    ran on different GPU models (the simulator names its cross-model runs `<profile>-d<n>-<model>`)."""
    _prepare(con, day, [])
    rows = con.execute(
        "SELECT DISTINCT j.job_id, s.gpu_model FROM job_energy_input_jobs AS j "
        "JOIN (SELECT DISTINCT gpu_uuid, gpu_model FROM stg_gpu_samples WHERE day = ?) AS s USING (gpu_uuid) "
        "WHERE starts_with(j.job_id, ?) AND CAST(j.started_at AS DATE) = ? ORDER BY j.job_id", [day, profile, day]).fetchall()
    return [(a, b) for a, ma in rows for b, mb in rows if a != b and ma != mb]


def job_energy_day(con: duckdb.DuckDBPyConnection, day: dt.date, pairs: Sequence[tuple[str, str]], *,
                   time_scale: float = 1.0) -> list[JobEnergyPrediction]:
    """Predict each pair's target run from its source run; replace the day's fct_job_energy_prediction rows."""
    job_ids = sorted({j for pair in pairs for j in pair})
    models: dict[str, str] = {}
    if job_ids:
        _prepare(con, day, [])
        for job_id, model in con.execute(
                "SELECT DISTINCT j.job_id, s.gpu_model FROM job_energy_input_jobs AS j JOIN stg_gpu_samples AS s "
                "ON s.gpu_uuid = j.gpu_uuid AND s.day = ? WHERE j.job_id IN (SELECT unnest(?))", [day, job_ids]).fetchall():
            models[job_id] = model
    missing = [j for j in job_ids if j not in models]
    if missing:
        raise ValueError(f"jobs {missing} have no samples on {day}: expected jobs that ran that day")
    rows = predict_job_energy(con, day, job_ids, sorted(set(models.values())), time_scale=time_scale) if job_ids else []
    by_key = {(r["job_id"], r["to_gpu_model"]): r for r in rows}
    out = []
    for source, target in pairs:
        r = by_key.get((source, models[target]))
        measured = by_key.get((target, models[target]), {}).get("source_energy_kwh")
        if r is None:
            continue
        error = 100.0 * (r["predicted_energy_kwh"] - measured) / measured if measured else None
        out.append(JobEnergyPrediction(day, source, models[source], models[target], target, r["predicted_energy_kwh"],
                                       measured, r["source_energy_kwh"], error, time_scale))
    con.execute(load_sql("fct_job_energy_prediction"))
    replace_day_rows(con, day, {"fct_job_energy_prediction": (
        ["day", "job_id", "from_gpu_model", "to_gpu_model", "target_job_id", "predicted_energy_kwh",
         "measured_energy_kwh", "source_energy_kwh", "error_pct", "time_scale"],
        [[p.day, p.job_id, p.from_gpu_model, p.to_gpu_model, p.target_job_id, p.predicted_energy_kwh,
          p.measured_energy_kwh, p.source_energy_kwh, p.error_pct, p.time_scale] for p in out])})
    return out
