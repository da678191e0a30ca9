"""The power fit's features: the samples it reads, the sums stored per day, the feature views.

All of it is SQL in models/sql/, run through joulehouse.warehouse.sqlio; this module decides which
file runs over which relation and when:
- `input_view`: temp `power_input_samples`, the samples relation's readings of a window, one
  stream per GPU and day where a GPU had several (models.activity: the fit's feature choice
  counts rows, and NVML's 1 Hz rows would outvote DCGM's), with `interval_s` (paired here,
  models/sql/power_input_paired.sql, for a relation that lacks it);
- `update_suffstats`: each day's sufficient statistics, stored once in fct_power_fit_sums_hourly
  (models/sql/fct_power_fit_sums_hourly.sql) and summed again only when the day's samples changed
  (a new warehouse build of the day, or another row count);
- `build_power_features_from_stored` (what fit_day uses) and `build_power_features` (every sample:
  the reference path, which Spark runs from the same files, warehouse.spark_engine.power_suffstats,
  binding the values set here as variables): the temp tables power_feature_choice and
  power_stored_hours and the views power_feature_rows and power_features;
- `suffstats_rows`: n, X'X, X'y, y'y per GPU model and shape of the dynamic term.
"""

from __future__ import annotations

import datetime as dt
import hashlib

import duckdb

from joulehouse.models.activity import choose_streams, create_activity_macros, samples_view
from joulehouse.models.settings import ModelSettings
from joulehouse.models.sql import SQL
from joulehouse.warehouse.sqlio import (alias_view, columns_of, ensure_columns, quoted_relation, records,
                                        relation_exists, set_variables, transaction)

SUMS_TABLE = "fct_power_fit_sums_hourly"
STREAM_COLUMNS = ("host", "gpu_uuid", "source")
# The SQL whose text decides a day's stored sums: the sums' file and the macros it calls (the feature
# choice, the measure it reads activity by).
SUMS_RULES_FILES = ("fct_power_fit_sums_hourly", "fit_feature_choice", "activity_of_kind")


def input_view(con: duckdb.DuckDBPyConnection, samples_relation: str, first_day: dt.date, last_day: dt.date) -> None:
    """Temp view (or table) power_input_samples: `samples_relation`'s readings of first_day..last_day,
    one stream per GPU and day where a GPU had several. Raises ValueError naming a missing relation."""
    quoted_relation(samples_relation)  # a plain identifier, or ValueError saying so
    if not relation_exists(con, samples_relation):
        raise ValueError(f"samples relation {samples_relation!r} does not exist in the warehouse")
    columns = set(columns_of(con, samples_relation))
    alias_view(con, "power_samples_source", samples_relation)
    several_sources = "source" in columns and SQL.execute(
        con, "power_several_sources", {"first_day": first_day, "last_day": last_day}).fetchone()[0]
    base = "power_samples_source"
    if several_sources and choose_streams(con, samples_relation, first_day, last_day, table="power_input_streams"):
        SQL.temp_view(con, "power_input_chosen", "power_input_chosen")
        base = "power_input_chosen"
    if "interval_s" in columns:
        alias_view(con, "power_input_samples", base)
    else:
        # Samples from elsewhere (an import, a test frame): paired once, into a table.
        samples_view(con, "power_input_base", quoted_relation(base))
        SQL.temp_table(con, "power_input_samples", "power_input_paired")
    SQL.execute(con, "power_dynamic_ratio")
    SQL.execute(con, "fit_feature_choice")  # the window's and each day's choice of features: one rule
    SQL.execute(con, "holdout_from_epoch_s")  # and where the window's held-out time starts
    create_activity_macros(con)  # the features and the sums read activity in their feature set's measure


def _build_ids_view(con: duckdb.DuckDBPyConnection, samples_relation: str) -> None:
    """Temp view power_sums_build_ids (day, build_id, readings_pruned): the warehouse build of each
    day's samples, and whether retention has since deleted them, where the warehouse records it
    (stg_gpu_samples); empty for any other relation."""
    if samples_relation == "stg_gpu_samples" and relation_exists(con, "fct_warehouse_build_daily"):
        ensure_columns(con, "fct_warehouse_build_daily", {"readings_pruned_at": "TIMESTAMPTZ"})
        SQL.temp_view(con, "power_sums_build_ids", "power_sums_build_ids_warehouse")
    else:
        SQL.temp_view(con, "power_sums_build_ids", "power_sums_build_ids_none")


def sums_rules() -> str:
    """The SHA-256 of the SQL that sums a day, with the macros it chooses features and reads activity
    by: sums stored under other rules are summed again (a fix to the sums, such as PCIe tx without rx
    no longer read as rx = 0, reached only the days after it, the days before kept their old sums for
    the whole window)."""
    return hashlib.sha256("".join(SQL.text(name) for name in SUMS_RULES_FILES).encode()).hexdigest()


def _ensure_suffstats_table(con: duckdb.DuckDBPyConnection, samples_relation: str) -> None:
    _build_ids_view(con, samples_relation)
    SQL.empty_table(con, SUMS_TABLE, "fct_power_fit_sums_hourly", {"days": [], "source": "", "rules": ""})
    # Tables stored before builds (or rules) were recorded: NULL, so each day is summed once more.
    ensure_columns(con, SUMS_TABLE, {"samples_build_id": "UUID", "rules_sha256": "VARCHAR"})


def update_suffstats(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings,
                     samples_relation: str = "stg_gpu_samples") -> list[dt.date]:
    """Store `day`'s sufficient statistics in fct_power_fit_sums_hourly, and those of any day of its
    window whose stored sums no longer match the samples: never computed, rebuilt by the warehouse
    since (its build id changed), or, for a relation the warehouse does not build, a changed row count.
    Returns the days (re)computed. One scan of those days' samples; a day already stored costs a count."""
    first = day - dt.timedelta(days=settings.history_days - 1)
    input_view(con, samples_relation, first, day)
    _ensure_suffstats_table(con, samples_relation)
    window = {"first_day": first, "last_day": day}
    counts = dict(SQL.execute(con, "power_input_day_counts", window).fetchall())
    builds = {r["day"]: r for r in SQL.records(con, "power_sums_builds", window)}
    # A day whose readings retention deleted keeps the sums stored from them (a backfill's window)
    pruned = {d for d, r in builds.items() if r["readings_pruned"]}
    rules = sums_rules()
    stored = {r["day"]: (r["n_rows"], r["samples_build_id"], r["rules_sha256"])
              for r in SQL.records(con, "power_sums_stored", {**window, "source": samples_relation})}
    build_of = {d: r["build_id"] for d, r in builds.items()}
    days = sorted(({d for d in counts.keys() | stored.keys()
                    if (counts.get(d, 0), build_of.get(d), rules) != stored.get(d, (0, None, rules))} | {day})
                  - pruned)
    with transaction(con):
        SQL.execute(con, "power_sums_delete", {"source": samples_relation, "days": days})
        SQL.insert_into(con, SUMS_TABLE, "fct_power_fit_sums_hourly",
                        {"days": days, "source": samples_relation, "rules": rules})
    return days


def _build_features(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings) -> None:
    """Temp views power_feature_rows and power_features: each model's samples from its
    stored_until_epoch_s on (power_feature_choice first)."""
    window_start = day - dt.timedelta(days=settings.history_days - 1)
    (earliest,) = SQL.execute(con, "power_feature_earliest_stored").fetchone()
    if earliest is None:
        rows_from_day = day
    elif earliest <= 0:
        rows_from_day = window_start
    else:
        rows_from_day = max(window_start, dt.datetime.fromtimestamp(earliest, dt.timezone.utc).date())
    set_variables(con, {"power_features_day": day, "power_features_history_days": settings.history_days,
                        "power_features_rows_from_day": rows_from_day,
                        "power_features_max_interval_s": float(settings.max_sample_interval_s)})
    SQL.temp_view(con, "power_feature_rows", "power_feature_rows")
    SQL.temp_view(con, "power_features", "power_features")


def build_power_features(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings,
                         samples_relation: str = "stg_gpu_samples") -> None:
    """(Re)create the temp tables `power_feature_choice`, `power_stored_hours` (empty) and
    `power_features` (every sample) for the window ending on `day`, from the samples alone: the
    reference path (other engines mirror it); fit_day reads stored statistics instead."""
    input_view(con, samples_relation, day - dt.timedelta(days=settings.history_days - 1), day)
    _ensure_suffstats_table(con, samples_relation)
    SQL.temp_table(con, "power_feature_choice", "power_feature_choice", {
        "day": day, "history_days": settings.history_days, "holdout_fraction": settings.holdout_fraction,
        "holdout_max_days": settings.holdout_max_days})
    SQL.temp_table(con, "power_stored_hours", "power_stored_hours_none")
    _build_features(con, day, settings)


def build_power_features_from_stored(con: duckdb.DuckDBPyConnection, day: dt.date, settings: ModelSettings,
                                     samples_relation: str = "stg_gpu_samples") -> None:
    """As build_power_features, but training hours before each model's held-out boundary (and before
    `day`) come from fct_power_fit_sums_hourly (updated first), so only the held-out tail, `day`
    itself and the samples of models without varying clock are read."""
    update_suffstats(con, day, settings, samples_relation)
    params = {"day": day, "history_days": settings.history_days, "source": samples_relation}
    SQL.temp_table(con, "power_feature_choice", "power_window_choice", {
        **params, "holdout_fraction": settings.holdout_fraction, "holdout_max_days": settings.holdout_max_days})
    SQL.temp_table(con, "power_stored_hours", "power_stored_hours", params)
    _build_features(con, day, settings)


def suffstats_rows(con: duckdb.DuckDBPyConnection, settings: ModelSettings) -> list[dict]:
    """models/sql/power_suffstats.sql over the current `power_features` view: n, X'X, X'y, y'y
    per GPU model and shape of the dynamic term (build_power_features* first)."""
    return records(SQL.execute(con, "power_suffstats", {
        "alpha_min": settings.alpha_min, "alpha_step": settings.alpha_step, "alpha_count": settings.alpha_count,
        "gamma_min": settings.activity_exponent_min, "gamma_step": settings.activity_exponent_step,
        "gamma_count": settings.activity_exponent_count,
        "hold_grid_s": [float(x) for x in settings.activity_hold_grid_s]}))
