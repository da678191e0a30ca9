"""A job's energy on another GPU model, predicted before it runs there (kWh).

What is known before the job runs on B: its run on A (telemetry, energy, wall time, GPUs) and B's
fitted power model. The prediction (models.other_gpu_energy.predict_energy_on, the same predictor
as `joulehouse jobs predict-energy`):
- power on B: B's fitted model (fct_power_model, the latest fit on or before the day) on each of
  the job's samples on A (activity, DRAM activity, PCIe traffic, relative SM clock, chip
  temperature), capped at B's power limit, time-averaged (models/sql/job_energy_prediction.sql);
- time on B: the time on A x the catalogue's throughput ratio A/B at the job's bottleneck (peak
  tensor rate at bf16 for compute-bound work, memory bandwidth for memory-bound; the bottleneck
  is the busier of the run's mean SM and DRAM activity) -- never the run on B's own duration;
- refined by the fleet's jobs that ran on both models: the median of measured over predicted
  energy of the pairs of the same two models on earlier days (fct_job_energy_prediction) and of
  the day's other pairs, never the job's own.

`job_energy_day(con, day, pairs)` checks the prediction where the same profile ran on two models
(pairs of job ids; `same_profile_pairs` finds them by a shared job-id prefix, as the simulator's
cross-model runs have) and writes fct_job_energy_prediction. The run on B may have done a
different amount of work (the simulator's runs last the same two hours, the H100 doing ~2.6x the
samples): the measured energy compared is B's energy per unit of work (samples_total, else
flops_total) times the work done on A, and B's raw energy where neither is reported.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from joulehouse.models.activity import create_activity_view
from joulehouse.models.gpu_catalogue import CatalogueError
from joulehouse.models.other_gpu_energy import predict_energy_on, refine_with_pairs
from joulehouse.models.day_jobs import JOBS_RELATIONS, jobs_relation
from joulehouse.models.power import load_fit
from joulehouse.warehouse.sqlio import quoted_relation, records, relation_exists, replace_day_rows
from joulehouse.models.sql import load_sql

MAX_SAMPLE_INTERVAL_S = 60.0
log = logging.getLogger(__name__)


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
    time_scale: float  # predicted time on B / time on A
    predicted_time_s: float
    unrefined_predicted_energy_kwh: float
    refined_with_jobs: int
    method: str


def _prepare(con: duckdb.DuckDBPyConnection, day: dt.date, to_models: Sequence[str]) -> None:
    jobs = jobs_relation(con)
    if jobs is None:
        raise ValueError(f"no jobs relation (one of {JOBS_RELATIONS}) in the warehouse: job energy needs jobs")
    con.execute(f"CREATE OR REPLACE TEMP VIEW job_energy_input_jobs AS SELECT * FROM {quoted_relation(jobs)}")
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


def _work_done(con: duckdb.DuckDBPyConnection, job_ids: Sequence[str]) -> dict[str, float]:
    """Work each job reported (samples_total, else flops_total; summed over its GPUs), where it did."""
    return {job_id: float(work) for job_id, work in con.execute(load_sql("job_energy_work"), {"job_ids": list(job_ids)}).fetchall()
            if work is not None and work > 0}


def _earlier_pairs(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """(predicted before refinement, measured) kWh per (from, to) model pair of days before `day`."""
    if not relation_exists(con, "fct_job_energy_prediction"):
        return {}
    columns = {c for (c,) in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = "
                                         "'fct_job_energy_prediction'").fetchall()}
    if "unrefined_predicted_energy_kwh" not in columns:
        return {}
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for a, b, predicted, measured in con.execute(
            "SELECT from_gpu_model, to_gpu_model, unrefined_predicted_energy_kwh, measured_energy_kwh "
            "FROM fct_job_energy_prediction WHERE day < ? AND unrefined_predicted_energy_kwh > 0 "
            "AND measured_energy_kwh > 0", [day]).fetchall():
        pairs.setdefault((a, b), []).append((predicted, measured))
    return pairs


def job_energy_day(con: duckdb.DuckDBPyConnection, day: dt.date, pairs: Sequence[tuple[str, str]]) -> list[JobEnergyPrediction]:
    """Predict each pair's target run from its source run, as before it ran there; replace the
    day's fct_job_energy_prediction rows."""
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
    rows = predict_job_energy(con, day, job_ids, sorted(set(models.values()))) if job_ids else []
    work = _work_done(con, job_ids) if job_ids else {}
    by_key = {(r["job_id"], r["to_gpu_model"]): r for r in rows}
    unrefined: list[tuple[tuple[str, str], object, float | None]] = []
    for source, target in pairs:
        r, own = by_key.get((source, models[target])), by_key.get((target, models[target]))
        if r is None or own is None or not r["duration_s"]:
            continue
        if r["predicted_energy_kwh"] is None:
            log.warning("job %s on %s: no sample read its activity; no prediction on %s", source, day, models[target])
            continue
        n_gpus, time_s = int(r["n_gpus"]), float(r["duration_s"])
        power_b = r["predicted_energy_kwh"] * 3.6e6 / (time_s * n_gpus)  # B's model on A's profile, W per GPU
        bottleneck = ("compute-bound" if (r["mean_activity_ratio"] or 0) >= (r["mean_memory_ratio"] or 0)
                      else "memory-bound")
        try:
            prediction = predict_energy_on(models[source], models[target], r["source_energy_kwh"] * 3.6e6, time_s,
                                           gpus=n_gpus, bottleneck=bottleneck, to_power_w=lambda _busy: power_b)
        except CatalogueError as exc:
            log.warning("no time ratio for %s -> %s on %s: %s", source, target, day, exc)
            continue
        measured = own["source_energy_kwh"]
        if source in work and target in work:
            measured *= work[source] / work[target]  # B's energy for A's amount of work
        unrefined.append(((source, target), prediction, measured))
    earlier = _earlier_pairs(con, day)
    out = []
    for (source, target), prediction, measured in unrefined:
        a, b = models[source], models[target]
        others = [(p.predicted_energy_j / 3.6e6, m) for (s2, t2), p, m in unrefined
                  if (models[s2], models[t2]) == (a, b) and s2 != source and t2 != target and m]
        known = earlier.get((a, b), []) + others
        refined = refine_with_pairs(prediction, known)
        predicted_kwh = refined.predicted_energy_j / 3.6e6
        error = 100.0 * (predicted_kwh - measured) / measured if measured else None
        out.append(JobEnergyPrediction(
            day, source, a, b, target, predicted_kwh, measured, prediction.measured_energy_j / 3.6e6, error,
            prediction.time_ratio, prediction.predicted_time_s, prediction.predicted_energy_j / 3.6e6,
            len(known), refined.method))
    con.execute(load_sql("fct_job_energy_prediction"))
    for column, kind in (("predicted_time_s", "DOUBLE"), ("unrefined_predicted_energy_kwh", "DOUBLE"),
                         ("refined_with_jobs", "BIGINT"), ("method", "VARCHAR")):  # tables from before
        con.execute(f"ALTER TABLE fct_job_energy_prediction ADD COLUMN IF NOT EXISTS {column} {kind}")
    replace_day_rows(con, day, {"fct_job_energy_prediction": (
        list(PREDICTION_COLUMNS), [[getattr(p, c) for c in PREDICTION_COLUMNS] for p in out])})
    return out


PREDICTION_COLUMNS = ("day", "job_id", "from_gpu_model", "to_gpu_model", "target_job_id", "predicted_energy_kwh",
                      "measured_energy_kwh", "source_energy_kwh", "error_pct", "time_scale", "predicted_time_s",
                      "unrefined_predicted_energy_kwh", "refined_with_jobs", "method")
