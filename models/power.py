"""Daily power-model fit per GPU model, validated on held-out time, written to the warehouse.

`fit_day(con, day, settings)` fits P = a0 + aT*(T-25) + a_dyn*act^gamma*(f/f_max)^alpha + a_mem*mem
+ a_pcie*pcie_GBps (watts) for every GPU model seen in the `history_days` up to `day` (gamma = 1
where clocks are read; without them, gamma and a decay after work stops are fitted instead):
1. models/sql/fct_power_fit_sums_hourly.sql stores each day's sums once (per hour, GPU model and SM
   clock; the day's feature choice; power-limited rows, SW cap bit 0x4 or power within 1% of the
   limit, left out), so a window of days is a sum over a small table, not a re-read of its samples;
2. models/sql/power_window_choice.sql picks the feature set per model over the window (DCGM when
   sm_active_ratio is in most rows, else NVML-only) and the held-out tail of time (last
   `holdout_fraction`); models/sql/power_features.sql reads only the samples the stored sums cannot
   stand for: the hour holding the held-out boundary onwards, `day` itself (for the residual table),
   and every sample of a model without varying clock (its decay term needs each sample's history);
3. models/sql/power_suffstats.sql adds those samples' X'X, X'y, y'y to the stored ones per grid point
   of the dynamic term's shape; numpy/scipy solve each grid point with sign bounds and keep the
   least training SSE;
4. held-out MAPE, R^2 and job-energy error are SQL aggregates of the held-out samples' residuals;
5. the gate (held-out MAPE, minimum rows) and drift against the previous fit are decided here.
Rows go to `fct_power_model` and `fct_power_residual_hourly` (delete-then-insert for the day).

In parts: the features and stored sums (steps 1-3) in models/power_features.py, the record, the
gate and the store (step 5) in models/power_store.py, the solve in models/coefficients.py; this
module runs them in order for a day (`fit_day`). Their public names are importable from here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import duckdb

from joulehouse.models.clock_exponent import with_sweep_exponent
from joulehouse.models.coefficients import FitError, PowerCoefficients, best_shape, coefficients_from
from joulehouse.models.power_features import (  # noqa: F401  (the public API, importable from here)
    build_power_features, build_power_features_from_stored, input_view, suffstats_rows, update_suffstats)
from joulehouse.models.power_store import (  # noqa: F401
    PowerFit, coefficients_of, drift_pct, gate, load_fit, previous_fit, store_fits, write_coefficients_table)
from joulehouse.models.settings import ModelSettings
from joulehouse.models.sql import SQL
from joulehouse.models.day_jobs import first_partition, jobs_relation, reading_job_partitions
from joulehouse.warehouse.sqlio import alias_view



def fit_day(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings, *,
            samples_relation: str = "stg_gpu_samples", suffstats: Sequence[dict] | None = None) -> list[PowerFit]:
    """Fit, validate and store one power model per GPU model for `day`; returns the fits.

    `suffstats`: the training sums computed elsewhere over the same window (rows of
    warehouse.spark_engine.power_suffstats: gpu_model, shape, n, X'X, X'y, y'y), used in place of
    models/sql/power_suffstats.sql; validation, residuals and the gate still run here."""
    build_power_features_from_stored(con, day, settings, samples_relation)
    summary = {r["gpu_model"]: r for r in SQL.records(con, "power_feature_summary")}
    if suffstats is not None:
        stats_rows = [dict(row) for row in suffstats]
        _check_suffstats_match(summary, stats_rows)
    else:
        stats_rows = suffstats_rows(con, settings)
    by_model: dict[str, list[dict]] = {}
    for row in stats_rows:
        by_model.setdefault(row["gpu_model"], []).append(row)

    coefficients: dict[str, PowerCoefficients] = {}
    failures: dict[str, str] = {}
    for gpu_model, info in summary.items():
        try:
            shape, solution = best_shape(by_model.get(gpu_model, []), has_clock=bool(info["has_clock"]))
        except FitError as exc:
            failures[gpu_model] = f"fit failed: {exc}"
            continue
        coefficients[gpu_model] = with_sweep_exponent(coefficients_from(solution, shape, info["f_max_mhz"]),
                                                      gpu_model, settings)

    write_coefficients_table(con, coefficients)
    metrics = {r["gpu_model"]: r for r in SQL.records(con, "power_holdout_metrics")}
    job_errors: dict[str, dict] = {}
    jobs = jobs_relation(con)
    if jobs == "raw_jobs":  # the lake's: only the partitions the held-out time can reach, checked
        first = con.execute("SELECT min(sampled_at)::DATE FROM power_holdout_predictions").fetchone()[0] or day
        first = first_partition(first, settings.job_max_days)
        with reading_job_partitions(con, jobs, first, day):
            SQL.temp_table(con, "power_input_jobs", "power_input_jobs", {"first_date": first, "day": day})
    elif jobs is not None:
        alias_view(con, "power_input_jobs", jobs)
    if jobs is not None:
        job_errors = {r["gpu_model"]: r for r in SQL.records(con, "power_job_energy_error")}

    fitted_at = dt.datetime.now(dt.timezone.utc)
    fits = []
    for gpu_model, info in summary.items():
        coef = coefficients.get(gpu_model)
        m = metrics.get(gpu_model, {})
        n_samples = int(info["n_training"])
        if coef is None:
            passed, reason, drift = False, failures[gpu_model], None
        else:
            passed, reason = gate(n_samples, m, settings)
            drift = drift_pct(previous_fit(con, gpu_model, day), coef)
        fits.append(PowerFit(
            gpu_model=gpu_model, day=day, fitted_at=fitted_at, feature_set=info["feature_set"],
            n_samples=n_samples, n_holdout=int(m.get("n_holdout") or 0),
            n_power_limited_excluded=int(info["n_power_limited_excluded"]),
            n_incomplete_excluded=int(info["n_incomplete_excluded"]), coefficients=coef,
            mape_pct=m.get("mape_pct"), r2=m.get("r2"), rmse_w=m.get("rmse_w"),
            job_energy_error_pct=job_errors.get(gpu_model, {}).get("job_energy_error_pct"),
            passed_gate=passed, gate_reason=reason, drift_pct=drift,
            drift_warning=None if drift is None else drift > settings.drift_warning_pct,
        ))
    store_fits(con, day, fits)
    return fits


class SuffstatsMismatch(FitError):
    """Sums computed elsewhere do not describe the warehouse's training rows (another lake state,
    another held-out cut): fitting on them could train on rows the validation then scores."""


def _check_suffstats_match(summary: dict[str, dict], rows: list[dict]) -> None:
    """Raise SuffstatsMismatch unless, per GPU model, the sums count the warehouse's training rows
    with its feature set."""
    seen: dict[str, tuple[int, str]] = {}
    for row in rows:
        n, feature_set = seen.get(row["gpu_model"], (0, row["feature_set"]))
        seen[row["gpu_model"]] = (max(n, int(row["n"] or 0)), feature_set)
    wrong = []
    for gpu_model, info in summary.items():
        want = (int(info["n_training"]), info["feature_set"])
        got = seen.get(gpu_model, (0, info["feature_set"]))
        if want[0] and got != want:
            wrong.append(f"{gpu_model}: {got[0]} rows ({got[1]}) against the warehouse's {want[0]} ({want[1]})")
    if wrong:
        raise SuffstatsMismatch("the given training sums do not match the warehouse: " + "; ".join(wrong))
