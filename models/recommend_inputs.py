"""What the recommender reads of a day: each GPU's activity profile (in the activity measure its
model's power fit reads), the latest fits, the prices and intensities its energy was charged at,
and the workload class of the jobs it ran. models.recommend and models.power_interval score them."""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.models.activity import create_activity_view
from joulehouse.models.day_jobs import jobs_relation
from joulehouse.models.power import load_fit
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import quoted_relation, records, relation_exists

# The activity measure a power fit's feature set reads (models/sql/recommend_gpu_profile.sql's kinds).
ACTIVITY_KIND_OF_FEATURE_SET = {"dcgm": "sm_active", "nvml": "util_gpu"}


def gpu_energy_prices(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, dict]:
    """Per GPU, the day's price (USD/kWh), grid intensity (gCO2e/kWh) and PUE, each weighted by the
    GPU's energy per hour, from rpt_context_hourly (the accounts' hourly context); {} without it."""
    if not (relation_exists(con, "rpt_context_hourly") and relation_exists(con, "fct_gpu_energy_hourly")):
        return {}
    has_sites = relation_exists(con, "dim_gpu") and con.execute(
        "SELECT count(*) FROM duckdb_columns() WHERE table_name = 'dim_gpu' AND column_name = 'site'").fetchone()[0]
    con.execute("CREATE OR REPLACE TEMP VIEW reco_input_gpu_sites AS " + (
        "SELECT gpu_uuid, site FROM dim_gpu WHERE site IS NOT NULL" if has_sites
        else "SELECT CAST(NULL AS VARCHAR) AS gpu_uuid, CAST(NULL AS VARCHAR) AS site WHERE false"))
    return {r["gpu_uuid"]: r for r in records(con.execute(load_sql("recommend_gpu_energy_prices"), {"day": day}))}


def latest_fits(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, dict]:
    """Each GPU model's latest fct_power_model row on or before `day` (models.power_store.load_fit); {} without any."""
    if not relation_exists(con, "fct_power_model"):
        return {}
    return {m: load_fit(con, m, day) for (m,) in con.execute(load_sql("recommend_fitted_models"), {"day": day}).fetchall()}


def gpu_day_profiles(con: duckdb.DuckDBPyConnection, day: dt.date, samples_relation: str = "stg_gpu_samples",
                     fits: dict[str, dict | None] | None = None) -> list[dict]:
    """What each GPU did on `day` (models/sql/recommend_gpu_profile.sql: busy hours, activity tenths, means),
    its tenths in the activity measure of its model's fit in `fits` (default: latest_fits)."""
    activity = create_activity_view(con, day, samples_relation=samples_relation)
    con.execute(f"CREATE OR REPLACE TEMP VIEW reco_input_samples AS SELECT * FROM {activity}")
    return records(con.execute(load_sql("recommend_gpu_profile"),
                               {"day": day} | fit_activity_models(latest_fits(con, day) if fits is None else fits)))


def fit_activity_models(fits: dict[str, dict | None]) -> dict[str, list[str]]:
    """The SQL parameters $sm_active_models and $util_gpu_models: the GPU models whose fit in `fits`
    reads each activity measure (a model without a fit is in neither)."""
    feature_sets = {m: f["feature_set"] for m, f in fits.items() if f}
    return {f"{kind}_models": sorted(m for m, s in feature_sets.items() if s == feature_set)
            for feature_set, kind in ACTIVITY_KIND_OF_FEATURE_SET.items()}


def gpu_workload_classes(con: duckdb.DuckDBPyConnection, day: dt.date) -> tuple[dict[str, str], list[list[str]]]:
    """Per GPU, the class of the jobs it ran longest on `day`, and the GPUs of each multi-GPU job;
    ({}, []) without a jobs relation."""
    jobs = jobs_relation(con)
    if jobs is None:
        return {}, []
    con.execute(f"CREATE OR REPLACE TEMP VIEW reco_input_jobs AS SELECT * FROM {quoted_relation(jobs)}")
    classes = {r["gpu_uuid"]: r["workload_class"]
               for r in records(con.execute(load_sql("recommend_gpu_workload_class"), {"day": day}))}
    return classes, [list(r["gpu_uuids"]) for r in records(con.execute(load_sql("recommend_job_groups"), {"day": day}))]
