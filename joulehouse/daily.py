"""What each task of the daily DAG does: one function per task, each a few calls into the
library for one day. Each opens the warehouse, does its step for `day`, and returns a small
JSON-able summary (it lands in Airflow's XCom). Re-running a day replaces that day's rows.

The orchestration of the daily run sits above every layer it calls (warehouse, models, reports)
and below the DAG files (dags/) and the CLI that call it; the layers below never import it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from joulehouse.settings import Settings, load_settings


# What the tasks below import, the heaviest last (Great Expectations, in validate_data). A process
# that runs them one after the other (dagrun's child) may import these while it waits for its days.
TASK_MODULES = (
    "joulehouse.warehouse.lake_partitions", "joulehouse.warehouse.lake_compact", "joulehouse.warehouse.build",
    "joulehouse.warehouse.gate", "joulehouse.warehouse.checks", "joulehouse.warehouse.spark_engine",
    "joulehouse.models.power", "joulehouse.models.thermal", "joulehouse.models.sensitivity",
    "joulehouse.models.power_interval", "joulehouse.models.job_energy", "joulehouse.models.bandwidth",
    "joulehouse.models.efficiency", "joulehouse.models.efficiency_precision", "joulehouse.models.outcome",
    "joulehouse.reports.accounts.carbon", "joulehouse.reports.accounts.tco", "joulehouse.reports.accounts.compute_cost",
    "joulehouse.models.recommend", "joulehouse.models.placement", "joulehouse.reports.export.signed_config",
    "joulehouse.reports.export.placement_advice", "joulehouse.reports.export.headline_metrics",
    "joulehouse.reports.page.render", "joulehouse.reports.dashboard.render",
    "great_expectations", "great_expectations.expectations",
)


def import_task_modules() -> None:
    """Import TASK_MODULES ahead of the tasks; one that fails is left to the task that needs it,
    which then fails with its error."""
    import importlib

    for name in TASK_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (the task reports it)
            pass


def _load(day: str, config: str | None) -> tuple[dt.date, Settings]:
    return dt.date.fromisoformat(day), load_settings(config)


@contextmanager
def _warehouse(settings: Settings, read_only: bool = False,
               publish_on: tuple[type[BaseException], ...] = ()) -> Iterator[object]:
    """The warehouse for one step: read-only on the published file, or writable on a copy that is
    published by an atomic rename when the step ends (warehouse.publish), so that analysts who
    hold the file open never make a step fail and never see a half-written one."""
    from joulehouse.warehouse.db import connect
    from joulehouse.warehouse.publish import published_connection
    from joulehouse.warehouse.readings import follow_moved_files

    # [warehouse] threads and memory_limit hold for every step (they were the bench's alone, and
    # the DAG's steps ran at DuckDB's defaults: every core, 80% of the machine's memory)
    limits = {"threads": settings.warehouse.threads, "memory_limit": settings.warehouse.memory_limit}
    if not read_only:
        with published_connection(settings.warehouse.db_path, settings.lake.path, publish_on=publish_on,
                                  **limits) as con:
            yield con
        return
    con = connect(settings.warehouse.db_path, settings.lake.path, read_only=True, **limits)
    try:
        follow_moved_files(con)  # a warehouse moved since its last build reads its files where they are
        yield con
    finally:
        con.close()


def _data_dir(path: str) -> Path | None:
    """The folder of a configured reference file, or None when the file is not configured."""
    return Path(path).parent.parent if path else None


def _summary(obj: object) -> dict:
    """A step's result as the task's return value: its scalar fields, and its lists of notes and
    days (as text); the notes had been dropped, and a backfill's were said nowhere."""
    if dataclasses.is_dataclass(obj):
        kept = {}
        for k, v in dataclasses.asdict(obj).items():
            if isinstance(v, (int, float, str, bool, type(None))):
                kept[k] = v
            elif isinstance(v, (list, tuple)) and all(isinstance(x, (str, dt.date)) for x in v):
                kept[k] = [x.isoformat() if isinstance(x, dt.date) else x for x in v]
        return kept
    return {"result": obj if isinstance(obj, (int, float, str, bool, type(None))) else str(obj)}


def _count(result: object) -> int | None:
    return len(result) if isinstance(result, (list, tuple)) else (result if isinstance(result, int) else None)


def list_lake_hosts(day: str, config: str | None) -> list[str]:
    """The hosts with a partition of any dataset for the day, the site's facility meter
    (`host=<site>`) included: what the per-host tasks map over. Raises NoReadingsForDay when no
    host has GPU readings: the run fails, saying where it looked, instead of skipping every step."""
    from joulehouse.collectors.schema import DATASETS
    from joulehouse.warehouse.lake_partitions import day_hosts, gpu_hosts_or_raise

    the_day, settings = _load(day, config)
    gpu_hosts_or_raise(settings.lake.path, the_day)
    return day_hosts(settings.lake.path, the_day, DATASETS)


def inspect_and_compact_lake_partition(day: str, config: str | None, host: str) -> dict:
    """One host's partitions of the day, each dataset it has: files, rows, bytes, and files that
    do not open; then, with `warehouse.compact_lake` on a local lake, each one's files rewritten as one."""
    from joulehouse.collectors import lakefs
    from joulehouse.warehouse.lake_compact import CompactionError, compact_host_day
    from joulehouse.warehouse.lake_partitions import host_datasets, inspect_partition

    the_day, settings = _load(day, config)
    inspected = {dataset: inspect_partition(settings.lake.path, the_day, host, dataset).as_dict()
                 for dataset in host_datasets(settings.lake.path, the_day, host)}
    result: dict = {**inspected, "compacted": []}
    if settings.warehouse.compact_lake and not lakefs.is_url(settings.lake.path):
        try:
            result["compacted"] = [r.as_dict() for r in compact_host_day(settings.lake.path, the_day, host)]
        except (CompactionError, ValueError) as exc:
            # (a ValueError is a host folder our writer would not name: never compacted, nothing cut short)
            cut_short = _compactions_cut_short(settings.lake.path, the_day, host) if isinstance(exc, CompactionError) else []
            if cut_short:
                # The compacted file lies beside files it replaces: the build would read those rows
                # twice (quarantined as duplicate_key, 40% of a host's day when one of three files
                # went). A retry of this task finishes the compaction before the build runs.
                raise CompactionError(f"{exc}; a compaction cut short in {', '.join(cut_short)} (its compacted "
                                      "file beside files it replaces) would be read twice by the build; "
                                      "a retry finishes it") from exc
            # Compaction saves bytes and time; the day's numbers do not depend on it, so the run goes
            # on (ValueError: a host folder another writer named, such as host=fd00%3A%3A7, that
            # our writer would not name a partition)
            logging.getLogger(__name__).warning("lake compaction of %s on %s skipped: %s", host, the_day, exc)
            result["compacted"] = [r.as_dict() for r in getattr(exc, "reports", [])]
            result["compaction_error"] = str(exc)
    return result


def _compactions_cut_short(lake: str, day: dt.date, host: str) -> list[str]:
    """The host's partition folders of `day` that hold an unfinished compaction's intent file."""
    from joulehouse.collectors.writer import partition_dir
    from joulehouse.warehouse.lake_compact import INTENT_GLOB
    from joulehouse.warehouse.lake_partitions import host_datasets

    folders = [Path(partition_dir(lake, dataset, day.isoformat(), host)) for dataset in host_datasets(lake, day, host)]
    return [str(folder) for folder in folders if any(folder.glob(INTENT_GLOB))]


def _spark_computed(the_day: dt.date, settings: Settings, now: dt.datetime) -> dict:
    """The day's heavy relations computed on Spark over the same lake (one session, stopped here)."""
    from joulehouse.warehouse.spark_engine import computed_relations, spark_task_session

    with spark_task_session(settings.warehouse.spark_master, app_name=f"joulehouse-build-{the_day}",
                            driver_memory=settings.warehouse.spark_driver_memory) as spark:
        return computed_relations(spark, settings.lake.path, the_day, settings.warehouse, now)


def _spark_fit_suffstats(the_day: dt.date, settings: Settings) -> list[dict]:
    """The power fit's training sums computed on Spark (one session, stopped here). Its `now` is
    the fit's: a reading stamped after the build ran but before now could differ between the
    engines only for a day still being written."""
    from joulehouse.warehouse.spark_engine import fit_suffstats, spark_task_session

    with spark_task_session(settings.warehouse.spark_master, app_name=f"joulehouse-fit-{the_day}",
                            driver_memory=settings.warehouse.spark_driver_memory) as spark:
        return fit_suffstats(spark, settings.lake.path, the_day, settings.warehouse, settings.models,
                             dt.datetime.now(dt.timezone.utc))


def build_warehouse(day: str, config: str | None) -> dict:
    """Views over the lake, the day's staging + quarantine, hourly GPU/node/facility energy.

    With `warehouse.engine = "spark"` the hourly GPU energy is computed on Spark
    (warehouse.spark_engine) and loaded in place of its DuckDB SQL; the rest stays on DuckDB."""
    from joulehouse.daily_order import day_warnings, earlier_days_not_built
    from joulehouse.warehouse.build import build_day
    from joulehouse.warehouse.spark_engine import check_engine

    the_day, settings = _load(day, config)
    engine = check_engine(settings.warehouse.engine)
    # One `now` for both engines: the future-timestamp quarantine rule must agree between them.
    now = dt.datetime.now(dt.timezone.utc)
    computed = _spark_computed(the_day, settings, now) if engine == "spark" else None
    with _warehouse(settings) as con:
        summary = build_day(con, the_day, settings.warehouse, now=now, computed=computed)
        earlier = earlier_days_not_built(con, settings.lake.path, the_day, settings.models.history_days)
    result = {**_summary(summary), "engine": engine, "spark_relations": sorted(computed or {}),
              "earlier_days_not_built": [d.isoformat() for d in earlier],
              "history_days": settings.models.history_days}
    for warning in day_warnings(the_day, {"build_warehouse": result}):
        logging.getLogger(__name__).warning("%s", warning)
    return result


def check_data(day: str, config: str | None) -> dict:
    """The blocking data checks (SQL, warehouse.gate): a failure stores its results, then raises
    BlockingCheckFailed. Great Expectations is not imported: its suites run in validate_data."""
    from joulehouse.warehouse.gate import BlockingCheckFailed, run_gate

    the_day, settings = _load(day, config)
    # A blocking failure stores its results before it fails the day: they are published too.
    with _warehouse(settings, publish_on=(BlockingCheckFailed,)) as con:
        summary = run_gate(con, the_day, settings.warehouse)
    result = {"blocking": len(summary.results), "failed_blocking": len(summary.failed_blocking),
              "days_to_rebuild": sorted(d.isoformat() for d, r in summary.rebuild if not r.success)}
    return result  # the gate's log names each changed folder; `joulehouse run` says the rebuild (day_warnings)


def validate_data(day: str, config: str | None) -> dict:
    """Great Expectations' suites (the warning rules) over the day's summaries, read from the
    published warehouse without holding the writer lock; then their rows of fct_check_results."""
    from joulehouse.warehouse.checks import validate_day
    from joulehouse.warehouse.gate import WARNING, store_check_results

    the_day, settings = _load(day, config)
    with _warehouse(settings, read_only=True) as con:
        summary = validate_day(con, the_day, settings.warehouse)
    with _warehouse(settings) as con:
        store_check_results(con, the_day, list(summary.results), WARNING)
    return {"warnings": len(summary.results), "failed_warnings": len(summary.failed_warnings)}


def fit_power_models(day: str, config: str | None) -> dict:
    """One power model per GPU model, validated on held-out time; thermal resistance per GPU."""
    from joulehouse.models.bandwidth import link_bandwidth_day
    from joulehouse.models.job_energy import job_energy_day, same_profile_pairs
    from joulehouse.models.power import SuffstatsMismatch, fit_day
    from joulehouse.models.power_interval import power_interval_day
    from joulehouse.models.sensitivity import sensitivity_day
    from joulehouse.models.thermal import fit_thermal_day
    from joulehouse.warehouse.spark_engine import check_engine

    the_day, settings = _load(day, config)
    engine = check_engine(settings.warehouse.engine)
    # With engine = "spark" the training sums over the window (the heavy aggregation) run on Spark
    # over the lake; the held-out validation, residuals and gate read the warehouse on DuckDB.
    suffstats = _spark_fit_suffstats(the_day, settings) if engine == "spark" else None
    fit_engine = engine
    with _warehouse(settings) as con:
        try:
            fits = fit_day(con, the_day, settings.models, suffstats=suffstats)
        except SuffstatsMismatch as exc:
            # The lake changed since the build (a late ship) or lacks days the warehouse has:
            # fit on the warehouse's own rows rather than on sums of other rows.
            logging.getLogger(__name__).warning("fit of %s on DuckDB: %s", the_day, exc)
            fits = fit_day(con, the_day, settings.models)
            fit_engine = f"duckdb ({exc})"
        thermal = fit_thermal_day(con, the_day)
        link_hours = link_bandwidth_day(con, the_day)
        sensitivities = sensitivity_day(con, the_day, settings.sensitivity)
        intervals, _curve = power_interval_day(con, the_day, settings.recommend)
        pairs = [p for profile in settings.models.cross_model_job_profiles
                 for p in same_profile_pairs(con, the_day, profile)]
        predictions = job_energy_day(con, the_day, pairs)
    return {"models": len(fits), "fit_engine": fit_engine, "thermal_gpus": thermal, "link_hours": link_hours,
            "sensitivities": _count(sensitivities), "power_intervals": _count(intervals),
            "job_energy_predictions": len(predictions)}


def measure_efficiency_and_outcomes(day: str, config: str | None) -> dict:
    """Energy per unit of work per job and setting, and what earlier recommendations saved."""
    from joulehouse.models.efficiency import build_efficiency
    from joulehouse.models.efficiency_precision import precision_efficiency_day
    from joulehouse.models.outcome import measure_outcomes

    the_day, settings = _load(day, config)
    with _warehouse(settings) as con:
        # the accounts find the day's jobs under the same bound (models.day_jobs), so they split a
        # GPU-hour among the jobs its measured shares were computed for
        max_days = settings.models.job_max_days
        # and weigh each reading where the day's energy bridged it ([warehouse] max_gap_s, max_counter_gap_s)
        efficiency = build_efficiency(con, the_day, job_max_days=max_days, warehouse=settings.warehouse)
        efficiency |= precision_efficiency_day(con, the_day, job_max_days=max_days)
        outcomes = measure_outcomes(con, the_day)
    return {"efficiency_rows": efficiency, "outcomes": outcomes}


def account_carbon_and_cost(day: str, config: str | None) -> dict:
    """Carbon (both scope 2 methods + embodied) and TCO for the day, attributed to jobs/teams."""
    from joulehouse.reports.accounts.carbon import carbon_day
    from joulehouse.reports.accounts.compute_cost import compute_cost_day
    from joulehouse.reports.accounts.tco import tco_day

    the_day, settings = _load(day, config)
    with _warehouse(settings) as con:
        # jobs found as the efficiency step found them: the same models.job_max_days (models.day_jobs)
        max_days = settings.models.job_max_days
        carbon = carbon_day(con, the_day, settings.carbon, _data_dir(settings.carbon.grid_file), job_max_days=max_days)
        cost = tco_day(con, the_day, settings.tco, _data_dir(settings.tco.price_file), job_max_days=max_days,
                       max_meter_gap_s=settings.warehouse.max_meter_gap_s)
        per_tflops_hour = compute_cost_day(con, the_day)
    for account, result in (("carbon", carbon), ("cost", cost)):
        for note in getattr(result, "notes", None) or ():
            logging.getLogger(__name__).warning("%s accounts of %s: %s", account, the_day, note)
    return {"carbon": _summary(carbon), "cost": _summary(cost), "compute_cost_rows": per_tflops_hour}


def recommend_power_limits(day: str, config: str | None) -> dict:
    """A power limit (and clock range where a cap would do nothing) per GPU."""
    from joulehouse.models.recommend import recommend_day
    from joulehouse.models.placement import recommend_placement

    the_day, settings = _load(day, config)
    with _warehouse(settings) as con:
        # Each GPU's energy is priced at the hours of rpt_context_hourly the accounts just wrote;
        # the settings' flat price, default intensity and PUE stand in where an hour has none.
        n = recommend_day(con, the_day, settings.recommend,
                          carbon_price_usd_per_tco2e=settings.carbon.carbon_price_usd_per_tco2e,
                          demand_charge_usd_per_kw_month=settings.tco.demand_charge_usd_per_kw_month,
                          fallback_price_usd_per_kwh=settings.tco.flat_price_usd_per_mwh / 1000.0,
                          fallback_carbon_gco2e_per_kwh=settings.carbon.default_grid_gco2e_per_kwh,
                          fallback_pue=settings.carbon.default_pue)
        placements = recommend_placement(con, the_day, parking=settings.placement.parking,
                                         warehouse=settings.warehouse)
    return {"recommendations": n, "consolidation_and_placement": placements}


def report_path(settings: Settings, day: dt.date) -> Path:
    """Where the day's report lands: reports/YYYY-MM-DD.html beside the warehouse (with the one
    plotly.js every report there loads)."""
    return Path(settings.warehouse.db_path).parent / "reports" / f"{day}.html"


def render_report(day: str, config: str | None) -> dict:
    """The HTML report of the day, and the dashboard over every day held."""
    from joulehouse.reports.dashboard.render import DASHBOARD_NAME, render_dashboard
    from joulehouse.reports.page.render import render_report as render

    the_day, settings = _load(day, config)
    out = report_path(settings, the_day)
    with _warehouse(settings, read_only=True) as con:
        path = render(con, the_day, out)
        # The dashboard over every day held, rebuilt after each day (the report links to it).
        dashboard = render_dashboard(con, out.parent / DASHBOARD_NAME)
        metrics = _write_headline_metrics(con, the_day, settings)
    # The last step: the day is whole for readers from here (fct_warehouse_build_daily.completed_at).
    from joulehouse.warehouse.build import mark_day_completed

    with _warehouse(settings) as con:
        completed = mark_day_completed(con, the_day)
    return {"report": str(path), "dashboard": str(dashboard), "headline_metrics": metrics,
            "day_completed": completed}


def _write_headline_metrics(con, the_day: dt.date, settings: Settings) -> str | None:
    """The day's headline as a node_exporter textfile ([export] metrics_textfile)."""
    from joulehouse.reports.export.headline_metrics import write_headline_metrics

    out_dir = Path(settings.export.out_dir)
    target = settings.export.metrics_textfile or out_dir.parent / "metrics" / "joulehouse_daily.prom"
    export = out_dir / f"recommended-config-{the_day.isoformat()}.json"
    written = write_headline_metrics(con, the_day, target, export_path=export)
    return str(written) if written else None


def export_recommended_config(day: str, config: str | None) -> dict:
    """The signed recommended-config file, gated on the power models' quality."""
    from joulehouse.reports.export.placement_advice import export_placement_advice
    from joulehouse.reports.export.signed_config import CONFIG_NAME, export_config

    the_day, settings = _load(day, config)
    with _warehouse(settings, read_only=True) as con:
        # The config of day D takes effect when D is over: a fixed `now` makes a re-run of the
        # day byte-identical, and a backfilled old day exports a window that has already passed.
        effective_at = dt.datetime.combine(the_day + dt.timedelta(days=1), dt.time(), dt.timezone.utc)
        path = export_config(con, the_day, settings.export, now=effective_at,
                             private_key_path=settings.export.private_key_path)
        advice = export_placement_advice(con, the_day, settings.export, now=effective_at,
                                         window_hours=settings.placement.deferrable_window_hours,
                                         private_key_path=settings.export.private_key_path,
                                         tco=settings.tco, data_dir=_data_dir(settings.tco.price_file))
    return {"export": str(path), "polled_by_agents": path.name == CONFIG_NAME, "placement_advice": str(advice)}


def publish_recommended_config(config: str | None) -> dict:
    """Copy the latest signed export to `[export] publish_url`, where node agents fetch it."""
    from joulehouse.reports.export.publish import publish_config

    settings = load_settings(config)
    if not settings.export.publish_url:
        return {"config": config, "published": None,
                "why": "export.publish_url is empty: agents fetch the export folder itself"}
    return {"config": config, "published": publish_config(settings.export.out_dir, settings.export.publish_url)}
