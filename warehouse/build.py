"""Building one day of the warehouse: views over the lake, then that day's rows of every table.

Each `day` relation is replaced for the built day only (DELETE that day, INSERT the new rows)
inside one transaction: a re-run of a day replaces exactly that day; a failure leaves the
previous state. Only the lake partitions the day needs are read: its own `date=` folder and the
neighbouring days' (for the readings just across midnight that interpolation at the day's first
and last hour needs), filtered on the typed `date` partition column so DuckDB opens only those
files. The cost of a day therefore grows with the fleet's readings per day and not with history,
except dim_gpu, which re-reads fct_gpu_coverage_daily (one row per GPU and day). The per-GPU
relations (BATCHED_RELATIONS) are built a batch of hosts at a time (warehouse/host_batches.py),
so the readings one query sorts and holds stay bounded whatever the fleet's size. The same
transaction deletes the clean readings of days past `readings_retention_days` (prune_readings),
so the file stops growing with history. The clean readings themselves (stg_gpu_samples) are
Parquet files beside the file, written once and read through a view (warehouse/readings.py).
"""

from __future__ import annotations

import datetime as dt
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from joulehouse.collectors import lakefs
from joulehouse.collectors.schema import DATASETS
from joulehouse.warehouse.settings import WarehouseSettings
from joulehouse.warehouse.catalog import Relation, relations
from joulehouse.warehouse import readings
from joulehouse.warehouse.host_batches import BUILD_SQL, host_batches
from joulehouse.warehouse.lake_contract import (LakeContractError, build_dates, check_required, contract_view,
                                                  day_files, ensure_contract_views, narrowed, stand_in_files)
from joulehouse.warehouse.sqlio import ensure_columns, relation_exists, replace_day, transaction
from joulehouse.warehouse.inventory import InventoryError, inventory_file
from joulehouse.warehouse.lake_fingerprint import build_window, record_fingerprint

class BuildError(RuntimeError):
    """Building a day failed; the message names the day, the relation and the cause."""


@dataclass(frozen=True)
class BuildSummary:
    """What a build did: rows per relation for the day, and how long each step took (s)."""

    day: dt.date
    raw_gpu_rows: int
    clean_gpu_rows: int
    quarantined_gpu_rows: int
    rows: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    missing_datasets: tuple[str, ...] = ()
    inventory_found: bool = False
    # Readings deleted under warehouse.readings_retention_days: rows, and the newest day they came from.
    pruned_gpu_rows: int = 0
    pruned_through: dt.date | None = None
    # Days after this one built before it (a backfill): what later steps made of them did not see it.
    later_days_built: tuple[dt.date, ...] = ()

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())


def build_parameters(day: dt.date, settings: WarehouseSettings, now: dt.datetime, inventory: str) -> dict:
    """The bound parameters of the day's relations (warehouse/sql), on either engine."""
    # Neighbouring readings are needed no further than the longest interval that is bridged.
    margin_s = max(settings.max_gap_s, settings.max_counter_gap_s, settings.max_meter_gap_s)
    if margin_s >= 86400:
        raise BuildError(f"the longest bridged gap = {margin_s} s; expected less than one day")
    return {
        "day": day,
        "now": now,
        "margin_s": float(margin_s),
        "max_gap_s": float(settings.max_gap_s),
        "max_counter_gap_s": float(settings.max_counter_gap_s),
        "max_meter_gap_s": float(settings.max_meter_gap_s),
        "meter_bucket_s": 3600,  # fct_pue_hourly's hours (the demand charge reads its rule per quarter-hour)
        "max_clock_skew_s": float(settings.max_clock_skew_s),
        "max_power_over_limit_ratio": float(settings.max_power_over_limit_ratio),
        "max_power_abs_w": float(settings.max_power_abs_w),
        "min_temp_c": float(settings.min_temp_c),
        "max_temp_c": float(settings.max_temp_c),
        "max_sm_clock_mhz": float(settings.max_sm_clock_mhz),
        "max_mem_clock_mhz": float(settings.max_mem_clock_mhz),
        "inventory_path": inventory,
    }


def _bound(rel: Relation, params: dict) -> dict:
    missing = [p for p in rel.parameters if p not in params]
    if missing:
        raise BuildError(f"{rel.name}.sql uses unknown parameters {missing}")
    return {p: params[p] for p in rel.parameters}


def _body(rel: Relation) -> str:
    return rel.sql.rstrip().rstrip(";")


def _dataset_present(lake: str | None, dataset: str) -> bool:
    if lake is None:
        return False
    if lakefs.is_url(lake):
        # One listing of the dataset's prefix; the optional datasets get their empty stand-ins.
        fs = lakefs.filesystem(lake)
        return bool(fs.glob(f"{lake.split('://', 1)[1]}/{dataset}/date=*/*/*.parquet"))
    return any((Path(lake) / dataset).glob("date=*/*/*.parquet"))


def ensure_views(con: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    """(Re)create the raw_* views; returns the datasets the lake lacks (empty stand-ins)."""
    lake = con.execute("SELECT getvariable('jh_lake')").fetchone()[0]
    missing = []
    with tempfile.TemporaryDirectory(prefix="jh-views-") as scratch:
        # bound against empty stand-in files: binding them over the lake would open every footer
        with narrowed(con, {d: [p] for d, p in stand_in_files(Path(scratch)).items()}):
            ensure_contract_views(con)
            for rel in relations():
                if rel.kind != "view":
                    continue
                dataset = rel.name.removeprefix("raw_")
                if _dataset_present(lake, dataset):
                    body = _body(rel)
                else:
                    missing.append(dataset)
                    body = f"SELECT * FROM {contract_view(dataset)}"
                con.execute(f"CREATE OR REPLACE VIEW {rel.name} AS {body}")
    return tuple(missing)


def _day_files(con: duckdb.DuckDBPyConnection, day: dt.date, scratch: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Per dataset the files a build of `day` reads (its own and its neighbours' partitions),
    each checked against the lake contract: (an empty stand-in file where a dataset has none,
    the lake's files only)."""
    stand_ins = stand_in_files(scratch / "stand-ins")
    files, listed_files = {}, {}
    for dataset in DATASETS:
        listed = day_files(con, dataset, build_dates(day))
        try:
            check_required(con, dataset, listed)
        except LakeContractError as exc:
            raise BuildError(f"cannot build {day}: {exc}") from None
        except duckdb.Error as exc:
            raise BuildError(f"building int_gpu_samples_checked for {day} failed: a {dataset} file of the "
                             f"day cannot be read: {exc}") from None
        files[dataset] = listed or [stand_ins[dataset]]
        listed_files[dataset] = listed
    return files, listed_files


def _build_relation(con: duckdb.DuckDBPyConnection, rel: Relation, params: dict, computed: object = None,
                    *, append: bool = False, writer: readings.ReadingsWriter | None = None) -> None:
    """The day's rows of `rel`; `append`: add them to rows an earlier host batch wrote."""
    body, bound = _body(rel), _bound(rel, params)
    if computed is not None:
        # The day's rows came from another engine (Spark): load them in place of the SQL.
        con.register(f"computed_{rel.name}", computed)
        body, bound = f"SELECT * FROM computed_{rel.name}", {}
        try:
            _create_or_replace_rows(con, rel, params, body, bound, append, writer)
        finally:
            con.unregister(f"computed_{rel.name}")
        return
    _create_or_replace_rows(con, rel, params, body, bound, append, writer)


def _create_or_replace_rows(con: duckdb.DuckDBPyConnection, rel: Relation, params: dict, body: str,
                            bound: dict, append: bool, writer: readings.ReadingsWriter | None) -> None:
    if rel.kind == "readings":
        if writer is None:
            raise BuildError(f"{rel.name} is stored as readings files; the build passes no writer")
        writer.write(params["day"], body, bound, append=append)
    elif rel.kind == "temp":
        con.execute(f"CREATE OR REPLACE TEMP TABLE {rel.name} AS {body}", bound)
    elif rel.kind == "day":
        replace_day(con, rel.name, params["day"], body, bound, append=append)
    elif rel.kind == "table":
        con.execute(f"CREATE OR REPLACE TABLE {rel.name} AS {body}", bound)
    elif rel.kind == "results":
        if not relation_exists(con, rel.name, temporary=False):
            con.execute(f"CREATE TABLE {rel.name} AS {body}", bound)


def build_day(
    con: duckdb.DuckDBPyConnection,
    day: dt.date,
    settings: WarehouseSettings,
    *,
    now: dt.datetime | None = None,
    computed: Mapping[str, object] | None = None,
) -> BuildSummary:
    """Build `day` (a UTC date): views, dim_gpu, and that day's rows of every per-day relation.

    `now` is the reference for the future-timestamp rule (default: the current time, UTC).
    `computed` maps a relation's name to that day's rows computed elsewhere (a polars/Arrow
    frame with the relation's columns, e.g. from joulehouse.warehouse.spark_engine): they are loaded in
    place of the relation's SQL, in the same transaction and build order.
    Raises BuildError naming the relation that failed; the day's previous rows are then kept.
    """
    if not isinstance(day, dt.date) or isinstance(day, dt.datetime):
        raise BuildError(f"day must be a datetime.date, got {day!r}")
    now = now or dt.datetime.now(dt.timezone.utc)
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    missing = ensure_views(con)
    seconds["views"] = time.perf_counter() - started
    if "gpu_samples" in missing:
        raise BuildError(f"the lake has no gpu_samples files; cannot build {day}")
    with tempfile.TemporaryDirectory(prefix="jh-build-") as scratch:
        try:
            inventory, inventory_found = inventory_file(settings.inventory_path, Path(scratch))
        except InventoryError as exc:
            raise BuildError(f"cannot build {day}: {exc}") from None
        params = build_parameters(day, settings, now, inventory)
        t0 = time.perf_counter()
        files, listed = _day_files(con, day, Path(scratch))
        seconds["lake_contract"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        record_fingerprint(con, day, listed, build_window(day, params["margin_s"]))
        seconds["lake_fingerprint"] = time.perf_counter() - t0
        with narrowed(con, files):
            t0 = time.perf_counter()
            own_day = f"/date={day.isoformat()}/"  # the neighbours' files give only their minutes near midnight
            batches = host_batches(con, day, params["margin_s"], settings.build_hosts_per_batch,
                                   settings.build_readings_per_batch,
                                   [f for f in files["gpu_samples"] if own_day in f])
            seconds["host_batches"] = time.perf_counter() - t0
            computed = dict(computed or {})
            t0 = time.perf_counter()
            readings.sweep(con, settings.readings_superseded_keep_s)
            writer = readings.ReadingsWriter(con)
            seconds["sweep_readings"] = time.perf_counter() - t0
            if relation_exists(con, "fct_warehouse_build_daily", temporary=False):
                # built before retention and completion were recorded
                ensure_columns(con, "fct_warehouse_build_daily", BUILD_DAILY_LATER_COLUMNS)
            earlier_coverage_view(con)
            try:
                with transaction(con):
                    raw, pruned, pruned_through, counts = _build_in_transaction(
                        con, day, settings, params, batches, computed, writer, seconds)
            except BaseException:
                writer.discard()  # the files of a build that did not commit are listed nowhere
                raise
    clean, quarantined = counts["stg_gpu_samples"], counts["quarantine_gpu_samples"]
    later = tuple(d for (d,) in BUILD_SQL.execute(con, "later_days_built", {"day": day}).fetchall())
    return BuildSummary(
        day=day, raw_gpu_rows=raw, clean_gpu_rows=clean, quarantined_gpu_rows=quarantined,
        rows=counts, seconds=seconds, missing_datasets=missing, inventory_found=inventory_found,
        pruned_gpu_rows=pruned, pruned_through=pruned_through, later_days_built=later,
    )


def _build_in_transaction(con: duckdb.DuckDBPyConnection, day: dt.date, settings: WarehouseSettings, params: dict,
                          batches: list[list[str]], computed: dict, writer: readings.ReadingsWriter,
                          seconds: dict[str, float]) -> tuple[int, int, dt.date | None, dict[str, int]]:
    """Every relation of the day in build order, then the retention; (raw rows, pruned rows, cutoff, counts)."""
    raw = 0
    for rel, batch_index, hosts in _build_order(batches, computed):
        t0 = time.perf_counter()
        try:
            _build_relation(con, rel, {**params, "hosts": hosts}, computed.get(rel.name),
                            append=batch_index > 0, writer=writer)
        except duckdb.Error as exc:
            raise BuildError(f"building {rel.name} for {day} failed: {exc}") from exc
        seconds[rel.name] = seconds.get(rel.name, 0.0) + time.perf_counter() - t0
        if rel.name == "int_gpu_samples_checked":
            raw += con.execute("SELECT count(*) FROM int_gpu_samples_checked WHERE day = ?", [day]).fetchone()[0]
    t0 = time.perf_counter()
    pruned, pruned_through = prune_readings(con, day, settings.readings_retention_days)
    seconds["prune_readings"] = time.perf_counter() - t0
    if relation_exists(con, "fct_check_results", temporary=False):
        # the day's check results judged an earlier build: kept, a rebuilt day that then failed the
        # gate still showed the old warnings as passed beside the new blocking rows, and the
        # headline counted them; the gate and the checks write this build's
        con.execute("DELETE FROM fct_check_results WHERE day = ?", [day])
    return raw, pruned, pruned_through, _day_counts(con, day)


def prune_readings(con: duckdb.DuckDBPyConnection, day: dt.date, retention_days: int) -> tuple[int, dt.date | None]:
    """Take the stg_gpu_samples readings of days more than `retention_days` before the newest day
    built (never `day`'s) out of the view, and mark those days in fct_warehouse_build_daily; 0
    keeps every day. Their files go at a later build's sweep (warehouse/readings.py), so the
    readings stop growing with history. Returns (rows taken out, the cutoff day or None). Runs in
    the caller's transaction."""
    if retention_days <= 0:
        return 0, None
    (cutoff,) = BUILD_SQL.execute(con, "readings_cutoff", {"retention_days": retention_days}).fetchone()
    if cutoff is None:
        return 0, None
    deleted = readings.prune(con, day, cutoff)
    con.execute("UPDATE fct_warehouse_build_daily SET readings_pruned_at = now() "
                "WHERE day <= ? AND day <> ? AND readings_pruned_at IS NULL", [cutoff, day])
    return int(deleted), cutoff


def mark_day_completed(con: duckdb.DuckDBPyConnection, day: dt.date, at: dt.datetime | None = None) -> bool:
    """Record that the daily run finished its last step for `day`'s current build
    (fct_warehouse_build_daily.completed_at); False when the day was never built."""
    if not relation_exists(con, "fct_warehouse_build_daily", temporary=False):
        return False
    ensure_columns(con, "fct_warehouse_build_daily", BUILD_DAILY_LATER_COLUMNS)
    at = at or dt.datetime.now(dt.timezone.utc)
    (updated,) = BUILD_SQL.execute(con, "day_completed", {"day": day, "completed_at": at}).fetchone()
    return updated > 0


def _day_counts(con: duckdb.DuckDBPyConnection, day: dt.date) -> dict[str, int]:
    counts = {}
    for rel in relations():
        if rel.kind in ("day", "readings"):
            counts[rel.name] = con.execute(f"SELECT count(*) FROM {rel.name} WHERE day = ?", [day]).fetchone()[0]
    counts["dim_gpu"] = con.execute("SELECT count(*) FROM dim_gpu").fetchone()[0]
    return counts


def earlier_coverage_view(con: duckdb.DuckDBPyConnection) -> None:
    """Temp view earlier_gpu_coverage (gpu_uuid, day, last_reading_at): the last clean reading with
    power or counter of each GPU-day already built, which fct_gpu_coverage_daily reads to measure
    a gap that began before the day's margin; empty before the first build (the table the SQL
    would read does not exist yet). Tables from before the column hold last_sampled_at instead."""
    if relation_exists(con, "fct_gpu_coverage_daily", temporary=False):
        ensure_columns(con, "fct_gpu_coverage_daily", {"last_energy_reading_at": "TIMESTAMPTZ", "gpu_index": "SMALLINT",
                                                        **{c: "FLOAT" for c in DEVICE_LIMIT_COLUMNS}})
        body = ("SELECT gpu_uuid, day, coalesce(last_energy_reading_at, last_sampled_at) AS last_reading_at "
                "FROM fct_gpu_coverage_daily")
    else:
        body = "SELECT NULL::VARCHAR AS gpu_uuid, NULL::DATE AS day, NULL::TIMESTAMPTZ AS last_reading_at WHERE false"
    con.execute(f"CREATE OR REPLACE TEMP VIEW earlier_gpu_coverage AS {body}")


# The device's own limits (W) fct_gpu_coverage_daily carries per GPU-day, added after its first rows.
DEVICE_LIMIT_COLUMNS = ("power_limit_default_w", "power_limit_min_w", "power_limit_max_w")

# Columns of fct_warehouse_build_daily added after the first warehouses were built.
BUILD_DAILY_LATER_COLUMNS = {"readings_pruned_at": "TIMESTAMPTZ", "completed_at": "TIMESTAMPTZ",
                             "n_raw_gpu_samples": "BIGINT"}

# Per GPU, so built host batch by host batch (warehouse/host_batches.py); the rest reads them whole.
BATCHED_RELATIONS = ("int_gpu_samples_checked", "stg_gpu_samples", "quarantine_gpu_samples",
                     "fct_gpu_energy_hourly", "fct_gpu_coverage_daily")


def _build_order(batches: list[list[str]], computed: Mapping[str, object]) -> list[tuple[Relation, int, list[str]]]:
    """(relation, batch index, hosts) in build order: the relations before the batched ones; a
    relation computed elsewhere, once; the batched ones batch by batch (index > 0: append to the
    first batch's rows); then the rest, each once. `hosts` is every host outside the batches."""
    rels = [r for r in relations() if r.kind != "view"]
    first = next(i for i, r in enumerate(rels) if r.name in BATCHED_RELATIONS)
    all_hosts = [h for batch in batches for h in batch]
    order = [(r, 0, all_hosts) for r in rels[:first]]
    order += [(r, 0, all_hosts) for r in rels if r.name in BATCHED_RELATIONS and r.name in computed]
    for index, hosts in enumerate(batches or [[]]):
        order += [(r, index, hosts) for r in rels if r.name in BATCHED_RELATIONS and r.name not in computed]
    order += [(r, 0, all_hosts) for r in rels[first:] if r.name not in BATCHED_RELATIONS]
    return order
