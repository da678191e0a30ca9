"""The power fit's record and its gate: what a fit is, whether it may drive recommendations,
how it drifted since the last one, and where it is stored and read back.

A fit goes to `fct_power_model` (one row per GPU model and day) and its residuals to
`fct_power_residual_hourly`, both replaced for the day in one transaction (models/sql/ holds
their SQL). The gate: at least `min_samples` training readings and a held-out MAPE at most
`max_holdout_mape_pct` (ARCHITECTURE.md, "The models the numbers rest on").
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import duckdb

from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.settings import ModelSettings
from joulehouse.models.sql import SQL
from joulehouse.warehouse.sqlio import ensure_columns, insert_rows, relation_exists, replace_day, replace_day_rows, transaction

COEFFICIENTS_TABLE = "power_fit_coefficients"


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


def write_coefficients_table(con: duckdb.DuckDBPyConnection, coefficients: dict[str, PowerCoefficients]) -> None:
    """Temp table `power_fit_coefficients`, the view `power_predictions` over it (the models'
    power per row of power_features), which the residual SQL reads, and the temp table of its
    held-out rows `power_holdout_predictions`, which the validation SQL reads."""
    SQL.execute(con, "power_fit_coefficients")
    rows = [[m, c.static_w, c.temp_w_per_c, c.dyn_w, c.dyn_freq_exponent, c.mem_w, c.pcie_w_per_gbps,
             c.activity_exponent, c.activity_hold_s] for m, c in coefficients.items()]
    columns = ("gpu_model", "static_w", "temp_w_per_c", "dyn_w", "dyn_freq_exponent", "mem_w", "pcie_w_per_gbps",
               "activity_exponent", "activity_hold_s")
    insert_rows(con, COEFFICIENTS_TABLE, (columns, rows))
    SQL.execute(con, "power_predictions")
    SQL.execute(con, "power_holdout_predictions")


def previous_fit(con: duckdb.DuckDBPyConnection, gpu_model: str, day: dt.date) -> dict | None:
    """The latest earlier fit of `gpu_model` with coefficients (static_w, dyn_w, mem_w), or None."""
    if not relation_exists(con, "fct_power_model"):
        return None
    rows = SQL.records(con, "power_previous_fit", {"gpu_model": gpu_model, "day": day})
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


def store_fits(con: duckdb.DuckDBPyConnection, day: dt.date, fits: list[PowerFit]) -> None:
    """Replace `day`'s rows of fct_power_model with `fits` and of fct_power_residual_hourly with the
    residuals of power_fit_coefficients (written first), together."""
    SQL.execute(con, "fct_power_model")
    # tables created before these columns
    ensure_columns(con, "fct_power_model", {"activity_exponent": "DOUBLE", "activity_hold_s": "DOUBLE",
                                            "dyn_freq_exponent_source": "VARCHAR"})
    model_rows = []
    for f in fits:
        c = f.coefficients
        model_rows.append({
            "gpu_model": f.gpu_model, "day": f.day, "fitted_at": f.fitted_at, "feature_set": f.feature_set,
            "n_samples": f.n_samples, "n_holdout": f.n_holdout,
            "n_power_limited_excluded": f.n_power_limited_excluded,
            "n_incomplete_excluded": f.n_incomplete_excluded, "mape_pct": f.mape_pct, "r2": f.r2,
            "rmse_w": f.rmse_w, "job_energy_error_pct": f.job_energy_error_pct,
            **(c.as_row() if c else {}),
            "static_pct_per_10c": c.static_pct_per_10c if c else None,
            "passed_gate": f.passed_gate, "gate_reason": f.gate_reason, "drift_pct": f.drift_pct,
            "drift_warning": f.drift_warning,
        })
    with transaction(con):
        replace_day_rows(con, day, {"fct_power_model": model_rows})
        replace_day(con, "fct_power_residual_hourly", day, SQL.text("fct_power_residual_hourly"), {"day": day})


def load_fit(con: duckdb.DuckDBPyConnection, gpu_model: str, day: dt.date | None = None) -> dict | None:
    """The latest fct_power_model row for `gpu_model` on or before `day` (any day when None)."""
    if not relation_exists(con, "fct_power_model"):
        return None
    rows = SQL.records(con, "power_latest_fit", {"gpu_model": gpu_model, "day": day})
    return rows[0] if rows else None


def coefficients_of(row: dict) -> PowerCoefficients | None:
    """PowerCoefficients from a fct_power_model row (None where the fit failed)."""
    if row is None or row.get("static_w") is None:
        return None
    return PowerCoefficients(static_w=row["static_w"], temp_w_per_c=row["temp_w_per_c"], dyn_w=row["dyn_w"],
                             dyn_freq_exponent=row["dyn_freq_exponent"], mem_w=row["mem_w"],
                             pcie_w_per_gbps=row["pcie_w_per_gbps"], f_max_mhz=row["f_max_mhz"],
                             activity_exponent=row.get("activity_exponent") or 1.0,
                             activity_hold_s=row.get("activity_hold_s") or 0.0,
                             dyn_freq_exponent_source=row.get("dyn_freq_exponent_source"))
