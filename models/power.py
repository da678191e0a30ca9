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
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from joulehouse.models.settings import ModelSettings
from joulehouse.models.activity import choose_streams
from joulehouse.models.coefficients import FitError, PowerCoefficients, best_shape, coefficients_from
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import quoted_relation, records, relation_exists, replace_day, replace_day_rows, transaction

JOBS_RELATIONS = ("stg_jobs", "jobs", "raw_jobs")  # first one present is used for job energy


@dataclass(frozen=True)
class PowerFit:
    """One GPU model's fit for one day and how it did on time it did not see."""

    gpu_model: str
    day: dt.date
    fitted_at: dt.datetime
    feature_set: str
    n_samples: int
    n_holdout: int
    n_power_limited_excluded: int
    n_incomplete_excluded: int
    coefficients: PowerCoefficients | None
    mape_pct: float | None
    r2: float | None
    rmse_w: float | None
    job_energy_error_pct: float | None
    passed_gate: bool
    gate_reason: str | None
    drift_pct: float | None
    drift_warning: bool | None



def _input_view(con: duckdb.DuckDBPyConnection, samples_relation: str, first_day: dt.date, last_day: dt.date) -> None:
    """Temp view (or table) power_input_samples: `samples_relation`'s readings of first_day..last_day,
    one stream per GPU and day where a GPU had several (models.activity: the fit's feature choice
    counts rows, and NVML's 1 Hz rows would outvote DCGM's)."""
    quoted = quoted_relation(samples_relation)
    if not relation_exists(con, samples_relation):
        raise ValueError(f"samples relation {samples_relation!r} does not exist in the warehouse")
    columns = {row[0] for row in con.execute(f"DESCRIBE {quoted}").fetchall()}
    # Several sources in the window (a count of distinct values, far cheaper than choosing streams)?
    several_sources = "source" in columns and con.execute(
        f"SELECT count(DISTINCT source) > 1 FROM {quoted} WHERE day BETWEEN ? AND ?", [first_day, last_day]).fetchone()[0]
    if several_sources and choose_streams(con, samples_relation, first_day, last_day, table="power_input_streams"):
        quoted = ("(SELECT s.* FROM " + quoted + " AS s SEMI JOIN power_input_streams AS c ON c.day = s.day "
                  "AND c.gpu_uuid = s.gpu_uuid AND c.source IS NOT DISTINCT FROM s.source)")
    left_over = con.execute(  # a previous fit on this connection left a view or a table
        "SELECT 'TABLE' FROM duckdb_tables() WHERE temporary AND table_name = 'power_input_samples' "
        "UNION ALL SELECT 'VIEW' FROM duckdb_views() WHERE temporary AND view_name = 'power_input_samples'").fetchall()
    for (kind,) in left_over:
        con.execute(f"DROP {kind} power_input_samples")
    if "interval_s" in columns:
        con.execute(f"CREATE TEMP VIEW power_input_samples AS SELECT * FROM {quoted}")
    else:
        # Samples from elsewhere (an import, a test frame): the time to the next reading of the same
        # stream (as stg_gpu_samples pairs them: two sources' readings interleaved would halve it) is
        # computed here, once, into a table (a view would sort again for every query of the fit).
        stream = ", ".join(c for c in ("host", "gpu_uuid", "source") if c in columns)
        con.execute(f"CREATE TEMP TABLE power_input_samples AS SELECT *, epoch(lead(sampled_at) "
                    f"OVER (PARTITION BY {stream} ORDER BY sampled_at)) - epoch(sampled_at) AS interval_s FROM {quoted}")
    con.execute(load_sql("power_dynamic_ratio"))


def _build_ids_view(con: duckdb.DuckDBPyConnection, samples_relation: str) -> None:
    """Temp view power_sums_build_ids (day, build_id, readings_pruned): the warehouse build of each
    day's samples, and whether retention has since deleted them, where the warehouse records it
    (stg_gpu_samples); empty for any other relation."""
    if samples_relation == "stg_gpu_samples" and relation_exists(con, "fct_warehouse_build_daily"):
        pruned = con.execute("SELECT count(*) FROM duckdb_columns() WHERE table_name = 'fct_warehouse_build_daily' "
                             "AND column_name = 'readings_pruned_at'").fetchone()[0]
        body = ("SELECT day, build_id, " + ("readings_pruned_at IS NOT NULL" if pruned else "false")
                + " AS readings_pruned FROM fct_warehouse_build_daily")
    else:
        body = ("SELECT CAST(NULL AS DATE) AS day, CAST(NULL AS UUID) AS build_id, false AS readings_pruned "
                "WHERE false")
    con.execute(f"CREATE OR REPLACE TEMP VIEW power_sums_build_ids AS {body}")


def _ensure_suffstats_table(con: duckdb.DuckDBPyConnection, samples_relation: str) -> None:
    _build_ids_view(con, samples_relation)
    con.execute("CREATE TABLE IF NOT EXISTS fct_power_fit_sums_hourly AS SELECT * FROM ("
                + load_sql("fct_power_fit_sums_hourly") + ") WHERE false", {"days": [], "source": ""})
    # Tables stored before builds were recorded: NULL ids, so each day is summed once more.
    con.execute("ALTER TABLE fct_power_fit_sums_hourly ADD COLUMN IF NOT EXISTS samples_build_id UUID")


def update_suffstats(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings,
                     samples_relation: str = "stg_gpu_samples") -> list[dt.date]:
    """Store `day`'s sufficient statistics in fct_power_fit_sums_hourly, and those of any day of its
    window whose stored sums no longer match the samples: never computed, rebuilt by the warehouse
    since (its build id changed), or, for a relation the warehouse does not build, a changed row count.
    Returns the days (re)computed. One scan of those days' samples; a day already stored costs a count."""
    first = day - dt.timedelta(days=settings.history_days - 1)
    _input_view(con, samples_relation, first, day)
    _ensure_suffstats_table(con, samples_relation)
    counts = dict(con.execute(
        "SELECT day, count(*) FROM power_input_samples WHERE day BETWEEN ? AND ? AND power_w IS NOT NULL "
        "AND gpu_model IS NOT NULL GROUP BY day", [first, day]).fetchall())
    builds = dict(con.execute("SELECT day, build_id FROM power_sums_build_ids WHERE day BETWEEN ? AND ?",
                              [first, day]).fetchall())
    # A day whose readings retention deleted keeps the sums stored from them (a backfill's window)
    pruned = {d for (d,) in con.execute("SELECT day FROM power_sums_build_ids WHERE readings_pruned "
                                        "AND day BETWEEN ? AND ?", [first, day]).fetchall()}
    stored = {d: (n, build) for d, n, build in con.execute(
        "SELECT day, sum(n_rows), any_value(samples_build_id) FROM fct_power_fit_sums_hourly "
        "WHERE source_relation = ? AND day BETWEEN ? AND ? GROUP BY day", [samples_relation, first, day]).fetchall()}
    days = sorted(({d for d in counts.keys() | stored.keys()
                    if (counts.get(d, 0), builds.get(d)) != stored.get(d, (0, None))} | {day}) - pruned)
    with transaction(con):
        con.execute("DELETE FROM fct_power_fit_sums_hourly WHERE source_relation = ? AND list_contains(?, day)",
                    [samples_relation, days])
        con.execute("INSERT INTO fct_power_fit_sums_hourly BY NAME " + load_sql("fct_power_fit_sums_hourly"),
                    {"days": days, "source": samples_relation})
    return days


def _build_features(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings) -> None:
    """Temp view `power_features`: each model's samples from its stored_until_epoch_s on."""
    window_start = day - dt.timedelta(days=settings.history_days - 1)
    (earliest,) = con.execute("SELECT min(stored_until_epoch_s) FROM power_feature_choice").fetchone()
    if earliest is None:
        rows_from_day = day
    elif earliest <= 0:
        rows_from_day = window_start
    else:
        rows_from_day = max(window_start, dt.datetime.fromtimestamp(earliest, dt.timezone.utc).date())
    variables = {"power_features_day": day, "power_features_history_days": settings.history_days,
                 "power_features_rows_from_day": rows_from_day,
                 "power_features_max_interval_s": float(settings.max_sample_interval_s)}
    for name, value in variables.items():
        con.execute(f"SET VARIABLE {name} = ?", [value])
    con.execute("CREATE OR REPLACE TEMP VIEW power_feature_rows AS " + load_sql("power_feature_rows"))
    con.execute("CREATE OR REPLACE TEMP VIEW power_features AS " + load_sql("power_features"))


def build_power_features(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings,
                         samples_relation: str = "stg_gpu_samples") -> None:
    """(Re)create the temp tables `power_feature_choice`, `power_stored_hours` (empty) and
    `power_features` (every sample) for the window ending on `day`, from the samples alone: the
    reference path (other engines mirror it); fit_day reads stored statistics instead."""
    _input_view(con, samples_relation, day - dt.timedelta(days=settings.history_days - 1), day)
    _ensure_suffstats_table(con, samples_relation)
    con.execute("CREATE OR REPLACE TEMP TABLE power_feature_choice AS " + load_sql("power_feature_choice"),
                {"day": day, "history_days": settings.history_days, "holdout_fraction": settings.holdout_fraction,
                 "holdout_max_days": settings.holdout_max_days})
    con.execute("CREATE OR REPLACE TEMP TABLE power_stored_hours AS SELECT * FROM fct_power_fit_sums_hourly WHERE false")
    _build_features(con, day, settings)


def build_power_features_from_stored(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings,
                                     samples_relation: str = "stg_gpu_samples") -> None:
    """As build_power_features, but training hours before each model's held-out boundary (and before
    `day`) come from fct_power_fit_sums_hourly (updated first), so only the held-out tail, `day`
    itself and the samples of models without varying clock are read."""
    update_suffstats(con, day, settings, samples_relation)
    params = {"day": day, "history_days": settings.history_days, "source": samples_relation}
    con.execute("CREATE OR REPLACE TEMP TABLE power_feature_choice AS " + load_sql("power_window_choice"),
                {**params, "holdout_fraction": settings.holdout_fraction, "holdout_max_days": settings.holdout_max_days})
    con.execute("CREATE OR REPLACE TEMP TABLE power_stored_hours AS " + load_sql("power_stored_hours"), params)
    _build_features(con, day, settings)


def suffstats_rows(con: duckdb.DuckDBPyConnection, settings: ModelSettings) -> list[dict]:
    """models/sql/power_suffstats.sql over the current `power_features` view: n, X'X, X'y, y'y
    per GPU model and shape of the dynamic term (build_power_features* first)."""
    return records(con.execute(load_sql("power_suffstats"), {
        "alpha_min": settings.alpha_min, "alpha_step": settings.alpha_step, "alpha_count": settings.alpha_count,
        "gamma_min": settings.activity_exponent_min, "gamma_step": settings.activity_exponent_step,
        "gamma_count": settings.activity_exponent_count,
        "hold_grid_s": [float(x) for x in settings.activity_hold_grid_s]}))


def write_coefficients_table(con: duckdb.DuckDBPyConnection, coefficients: dict[str, PowerCoefficients]) -> None:
    """Temp table `power_fit_coefficients` that the validation and residual SQL join on."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE power_fit_coefficients (gpu_model VARCHAR, static_w DOUBLE, "
        "temp_w_per_c DOUBLE, dyn_w DOUBLE, dyn_freq_exponent DOUBLE, mem_w DOUBLE, pcie_w_per_gbps DOUBLE, "
        "activity_exponent DOUBLE, activity_hold_s DOUBLE)"
    )
    rows = [[m, c.static_w, c.temp_w_per_c, c.dyn_w, c.dyn_freq_exponent, c.mem_w, c.pcie_w_per_gbps,
             c.activity_exponent, c.activity_hold_s] for m, c in coefficients.items()]
    if rows:
        con.executemany("INSERT INTO power_fit_coefficients VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)


def _previous_fit(con: duckdb.DuckDBPyConnection, gpu_model: str, day: dt.date) -> dict | None:
    if not relation_exists(con, "fct_power_model"):
        return None
    rows = records(con.execute(
        "SELECT static_w, dyn_w, mem_w FROM fct_power_model WHERE gpu_model = ? AND day < ? "
        "AND static_w IS NOT NULL ORDER BY day DESC, fitted_at DESC LIMIT 1", [gpu_model, day]))
    return rows[0] if rows else None


def drift_pct(previous: dict | None, current: PowerCoefficients) -> float | None:
    """Largest relative change (%) of static, dynamic and memory power vs the previous fit.

    A term below 1 W on both days is skipped (a relative change of near-zero terms is noise)."""
    if previous is None:
        return None
    changes = []
    for name in ("static_w", "dyn_w", "mem_w"):
        old, new = previous[name], getattr(current, name)
        if old is None or (abs(old) < 1.0 and abs(new) < 1.0):
            continue
        changes.append(100.0 * abs(new - old) / max(abs(old), 1.0))
    return max(changes) if changes else None


def gate(n_samples: int, holdout: dict, settings: ModelSettings) -> tuple[bool, str | None]:
    """Whether a fit may drive recommendations, and if not, why. `holdout`: the model's row of
    power_holdout_metrics (n_holdout, holdout_hours, mape_pct; empty when nothing was held out)."""
    n_holdout, hours, mape_pct = int(holdout.get("n_holdout") or 0), holdout.get("holdout_hours") or 0.0, holdout.get("mape_pct")
    if n_samples < settings.min_samples:
        return False, f"only {n_samples} training samples (< min_samples {settings.min_samples})"
    if n_holdout < settings.min_holdout_samples or hours < settings.min_holdout_hours or mape_pct is None:
        return False, (f"only {n_holdout} held-out samples over {hours:.2f} h (< min_holdout_samples "
                       f"{settings.min_holdout_samples} or min_holdout_hours {settings.min_holdout_hours:g})")
    if mape_pct > settings.max_holdout_mape_pct:
        return False, f"held-out MAPE {mape_pct:.1f}% above {settings.max_holdout_mape_pct:.1f}%"
    return True, None


def fit_day(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings, *,
            samples_relation: str = "stg_gpu_samples", suffstats: Sequence[dict] | None = None) -> list[PowerFit]:
    """Fit, validate and store one power model per GPU model for `day`; returns the fits.

    `suffstats`: the training sums computed elsewhere over the same window (rows of
    warehouse.spark_engine.power_suffstats: gpu_model, shape, n, X'X, X'y, y'y), used in place of
    models/sql/power_suffstats.sql; validation, residuals and the gate still run here."""
    build_power_features_from_stored(con, day, settings, samples_relation)
    summary = {r["gpu_model"]: r for r in records(con.execute(load_sql("power_feature_summary")))}
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
        coefficients[gpu_model] = coefficients_from(solution, shape, info["f_max_mhz"])

    write_coefficients_table(con, coefficients)
    metrics = {r["gpu_model"]: r for r in records(con.execute(load_sql("power_holdout_metrics")))}
    job_errors: dict[str, dict] = {}
    jobs_relation = next((name for name in JOBS_RELATIONS if relation_exists(con, name)), None)
    if jobs_relation is not None:
        con.execute(f"CREATE OR REPLACE TEMP VIEW power_input_jobs AS SELECT * FROM {quoted_relation(jobs_relation)}")
        job_errors = {r["gpu_model"]: r for r in records(con.execute(load_sql("power_job_energy_error")))}

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
            drift = drift_pct(_previous_fit(con, gpu_model, day), coef)
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
    _store(con, day, fits)
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


def _store(con: duckdb.DuckDBPyConnection, day: dt.date, fits: list[PowerFit]) -> None:
    con.execute(load_sql("fct_power_model"))
    for column in ("activity_exponent", "activity_hold_s"):  # tables created before these columns
        con.execute(f"ALTER TABLE fct_power_model ADD COLUMN IF NOT EXISTS {column} DOUBLE")
    residual_sql = load_sql("fct_power_residual_hourly")
    model_rows = []
    for f in fits:
        c = f.coefficients
        values = {
            "gpu_model": f.gpu_model, "day": f.day, "fitted_at": f.fitted_at, "feature_set": f.feature_set,
            "n_samples": f.n_samples, "n_holdout": f.n_holdout,
            "n_power_limited_excluded": f.n_power_limited_excluded,
            "n_incomplete_excluded": f.n_incomplete_excluded, "mape_pct": f.mape_pct, "r2": f.r2,
            "rmse_w": f.rmse_w, "job_energy_error_pct": f.job_energy_error_pct,
            **(c.as_row() if c else {}),
            "static_pct_per_10c": c.static_pct_per_10c if c else None,
            "passed_gate": f.passed_gate, "gate_reason": f.gate_reason, "drift_pct": f.drift_pct,
            "drift_warning": f.drift_warning,
        }
        model_rows.append(values)
    with transaction(con):
        replace_day_rows(con, day, {"fct_power_model": model_rows})
        replace_day(con, "fct_power_residual_hourly", day, residual_sql, {"day": day})


def load_fit(con: duckdb.DuckDBPyConnection, gpu_model: str, day: dt.date | None = None) -> dict | None:
    """The latest fct_power_model row for `gpu_model` on or before `day` (any day when None)."""
    if not relation_exists(con, "fct_power_model"):
        return None
    rows = records(con.execute(
        "SELECT * FROM fct_power_model WHERE gpu_model = ? AND (CAST(? AS DATE) IS NULL OR day <= ?) "
        "ORDER BY day DESC, fitted_at DESC LIMIT 1", [gpu_model, day, day]))
    return rows[0] if rows else None


def coefficients_of(row: dict) -> PowerCoefficients | None:
    """PowerCoefficients from a fct_power_model row (None where the fit failed)."""
    if row is None or row.get("static_w") is None:
        return None
    return PowerCoefficients(static_w=row["static_w"], temp_w_per_c=row["temp_w_per_c"], dyn_w=row["dyn_w"],
                             dyn_freq_exponent=row["dyn_freq_exponent"], mem_w=row["mem_w"],
                             pcie_w_per_gbps=row["pcie_w_per_gbps"], f_max_mhz=row["f_max_mhz"],
                             activity_exponent=row.get("activity_exponent") or 1.0,
                             activity_hold_s=row.get("activity_hold_s") or 0.0)
