"""What the recommender reads of a day: each GPU's activity profile (in the activity measure its
model's power fit reads), the latest fits, the prices and intensities its energy was charged at,
and the workload class of the jobs it ran. models.recommend and models.power_interval score them.

A GPU that read no DRAM / memory activity, PCIe traffic or temperature all day (an NVML-only GPU
without util_mem_pct, a host without PCIe counters) is scored with its model's busy mean of the
day in that measure (`with_stand_ins`), and its reason says so. Taken as 0 (and 60 C), the
simulated fleet's fit moved the cap of 12 of its 16 GPUs by 25-50 W for memory alone, and
expected savings by up to 2.7 points (memory) and 7 points (temperature); its model's mean gave
the true cap on 15 of 16 (tests/models/conftest.py's fleet, one GPU's measure blanked at a time).
"""

from __future__ import annotations

import datetime as dt

import duckdb

from joulehouse.collectors.settings import MAX_PUE
from joulehouse.models.bandwidth import pcie_link_gbps
from joulehouse.models.caps import WorkloadProfile
from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.activity import create_activity_view
from joulehouse.models.day_jobs import jobs_relation
from joulehouse.models.power import load_fit
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.build import DEVICE_LIMIT_COLUMNS
from joulehouse.warehouse.sqlio import columns_of, quoted_relation, records, relation_exists

# The activity measure a power fit's feature set reads (models/sql/recommend_gpu_profile.sql's kinds):
# the pairing the fit itself chooses by (models/sql/fit_feature_choice.sql), for Python readers of a
# stored fit; tests/models/test_power_fit_feature_choice.py holds the two equal.
ACTIVITY_KIND_OF_FEATURE_SET = {"dcgm": "sm_active", "nvml": "util_gpu"}
# The profile row's busy means the fit of a feature set reads: activity, then memory activity.
PROFILE_MEASURES = {"dcgm": ("sm_active_ratio", "dram_ratio"), "nvml": ("util_gpu_ratio", "util_mem_ratio")}
# The other measures the fit weighs (its coefficient) besides activity: how the reason names each, its unit.
SIDE_MEASURES = {"dram_ratio": ("DRAM activity", "", "mem_w"), "util_mem_ratio": ("memory utilisation", "", "mem_w"),
                 "pcie_gbps": ("PCIe traffic", " GB/s", "pcie_w_per_gbps"), "temp_c": ("temperature", " C", "temp_w_per_c")}
# Where the fit gives a measure no weight and no GPU of the model read it: the value at which it weighs
# nothing in the slowdown either (no DRAM or PCIe load: judged compute-bound, the larger slowdown),
# and the fit's reference temperature (coefficients.py: static_w is at 25 C).
UNWEIGHED_VALUE = {"dram_ratio": 0.0, "util_mem_ratio": 0.0, "pcie_gbps": 0.0, "temp_c": 25.0}


class MissingMeasure(ValueError):
    """A GPU lacks a measure its model's power fit weighs, and nothing can stand in for it."""


def with_stand_ins(row: dict, feature_set: str, coef: PowerCoefficients) -> tuple[dict, list[str]]:
    """The profile row with each side measure it did not read (memory activity, PCIe, temperature)
    taken from its model's busy mean of the day (recommend_gpu_profile.sql's model_* columns), and
    a note per measure put in. Raises MissingMeasure where no GPU of the model read a measure its
    fit weighs; one that the fit does not weigh takes UNWEIGHED_VALUE."""
    filled, notes = dict(row), []
    for column in (PROFILE_MEASURES[feature_set][1], "pcie_gbps", "temp_c"):
        if row.get(column) is not None:
            continue
        name, unit, coefficient = SIDE_MEASURES[column]
        stand_in = row.get(f"model_{column}")
        if stand_in is not None:
            filled[column] = float(stand_in)
            notes.append(f"no {name} read: the {row.get('gpu_model')} GPUs' busy mean of the day "
                         f"({stand_in:.3g}{unit}) stands in")
        elif getattr(coef, coefficient) == 0:
            filled[column] = UNWEIGHED_VALUE[column]
            notes.append(f"no {name} read on any {row.get('gpu_model')} GPU that day; its power model gives it no "
                         f"weight, so it is taken as {UNWEIGHED_VALUE[column]:g}{unit}")
        else:
            raise MissingMeasure(f"no {name} read on this GPU or any other {row.get('gpu_model')} GPU that day, "
                                 f"and its power model weighs it ({coefficient} = {getattr(coef, coefficient):.3g})")
    return filled, notes


def gpu_profile(row: dict, feature_set: str) -> WorkloadProfile:
    """The GPU's busy means in the measures a fit of `feature_set` reads. Its side measures are
    filled first (with_stand_ins: a stand-in, said, or a refusal where the fit weighs the measure);
    one still missing here takes UNWEIGHED_VALUE. Raises ValueError where the fit's activity is
    missing (no reading is no evidence of idleness: scored as 0, a busy GPU read as idle), or where
    the row's tenths are of another activity measure: scored by that fit, they misstate the saving."""
    kind = row.get("deciles_activity_kind")
    if row.get("activity_deciles") and kind is not None and kind != ACTIVITY_KIND_OF_FEATURE_SET[feature_set]:
        raise ValueError(f"GPU {row.get('gpu_uuid')}: its activity tenths are of {kind}, but the {row.get('gpu_model')} "
                         f"power model ({feature_set}) reads {ACTIVITY_KIND_OF_FEATURE_SET[feature_set]}")
    activity, memory = PROFILE_MEASURES[feature_set]
    if row.get(activity) is None:
        raise ValueError(f"GPU {row.get('gpu_uuid')}: no busy mean of {activity.removesuffix('_ratio')}, the activity "
                         f"the {row.get('gpu_model')} power model ({feature_set}) reads: how busy it was is unknown")

    def side(column: str) -> float:
        return float(UNWEIGHED_VALUE[column] if row.get(column) is None else row[column])

    return WorkloadProfile(activity_ratio=float(row[activity]), memory_ratio=side(memory), pcie_gbps=side("pcie_gbps"),
                           temp_c=side("temp_c"), pcie_link_gbps=pcie_link_gbps(row.get("gpu_model")))


def gpu_energy_prices(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, dict]:
    """Per GPU, the day's price (USD/kWh), grid intensity (gCO2e/kWh) and PUE, each weighted by the
    GPU's energy per hour, from rpt_context_hourly (the accounts' hourly context), the site it was
    priced at, and at_no_site (placed at no site beside known ones: the accounts bill it no demand
    charge; models/sql/recommend_gpu_energy_prices.sql); {} without the context."""
    if not (relation_exists(con, "rpt_context_hourly") and relation_exists(con, "fct_gpu_energy_hourly")):
        return {}
    has_sites = relation_exists(con, "dim_gpu") and "site" in columns_of(con, "dim_gpu")
    has_regions = has_sites and "region" in columns_of(con, "dim_gpu")
    con.execute("CREATE OR REPLACE TEMP VIEW reco_input_gpu_sites AS " + (
        f"SELECT gpu_uuid, site, {'region' if has_regions else 'CAST(NULL AS VARCHAR) AS region'} FROM dim_gpu "
        "WHERE site IS NOT NULL" if has_sites
        else "SELECT CAST(NULL AS VARCHAR) AS gpu_uuid, CAST(NULL AS VARCHAR) AS site, CAST(NULL AS VARCHAR) AS region "
             "WHERE false"))
    con.execute("CREATE OR REPLACE TEMP VIEW reco_input_pue_hours AS " + (
        "SELECT hour_at, site, pue FROM fct_pue_hourly" if relation_exists(con, "fct_pue_hourly")
        else "SELECT CAST(NULL AS TIMESTAMPTZ) AS hour_at, CAST(NULL AS VARCHAR) AS site, CAST(NULL AS DOUBLE) AS pue "
             "WHERE false"))
    start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
    params = {"day": day, "day_start": start, "day_end": start + dt.timedelta(days=1), "max_pue": MAX_PUE}
    return {r["gpu_uuid"]: r for r in records(con.execute(load_sql("recommend_gpu_energy_prices"), params))}


def latest_fits(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, dict]:
    """Each GPU model's latest fct_power_model row on or before `day` (models.power_store.load_fit); {} without any."""
    if not relation_exists(con, "fct_power_model"):
        return {}
    return {m: load_fit(con, m, day) for (m,) in con.execute(load_sql("recommend_fitted_models"), {"day": day}).fetchall()}


def create_covered_hours_inputs(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create the macro covered_hours (models/sql/covered_hours.sql: the hours each GPU's
    readings cover, busy hours' base) and the temp view covered_hours_input_coverage it is given
    its covered_s from (fct_gpu_coverage_daily where built, else empty), with the limits (W) the
    device reported that day (NULL in a table built before it carried them)."""
    if relation_exists(con, "fct_gpu_coverage_daily"):
        present = set(columns_of(con, "fct_gpu_coverage_daily"))
        limits = ", ".join(c if c in present else f"CAST(NULL AS FLOAT) AS {c}" for c in DEVICE_LIMIT_COLUMNS)
        body = f"SELECT day, gpu_uuid, covered_s, {limits} FROM fct_gpu_coverage_daily"
    else:
        limits = ", ".join(f"CAST(NULL AS FLOAT) AS {c}" for c in DEVICE_LIMIT_COLUMNS)
        body = (f"SELECT CAST(NULL AS DATE) AS day, CAST(NULL AS VARCHAR) AS gpu_uuid, CAST(NULL AS DOUBLE) AS covered_s, "
                f"{limits} WHERE false")
    con.execute(f"CREATE OR REPLACE TEMP VIEW covered_hours_input_coverage AS {body}")
    con.execute(load_sql("covered_hours"))


def gpu_day_profiles(con: duckdb.DuckDBPyConnection, day: dt.date, samples_relation: str = "stg_gpu_samples",
                     fits: dict[str, dict | None] | None = None) -> list[dict]:
    """What each GPU did on `day` (models/sql/recommend_gpu_profile.sql: busy hours, activity tenths, means),
    its tenths in the activity measure of its model's fit in `fits` (default: latest_fits). Busy hours
    count no more than the warehouse's energy covered (fct_gpu_coverage_daily, where built)."""
    activity = create_activity_view(con, day, samples_relation=samples_relation)
    con.execute(f"CREATE OR REPLACE TEMP VIEW reco_input_samples AS SELECT * FROM {activity}")
    create_covered_hours_inputs(con)
    return records(con.execute(load_sql("recommend_gpu_profile"),
                               {"day": day} | fit_activity_models(latest_fits(con, day) if fits is None else fits)))


def fit_activity_models(fits: dict[str, dict | None]) -> dict[str, list[str]]:
    """The SQL parameters $sm_active_models and $util_gpu_models: the GPU models whose fit in `fits`
    reads each activity measure (a model without a fit is in neither), as the macro
    models/sql/fit_activity_kind.sql takes them."""
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
