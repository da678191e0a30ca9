"""The lake contract is what the build requires, no more: files written by hand with pyarrow (not
the project's writer) that carry only the required columns build, a missing optional column is
NULL, files of one day may differ in their optional and extra columns, and a file that lacks a
required column stops the day with one line naming the file and the column."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warehouse_lakes import DAY, MIDNIGHT, NOW

from joulehouse.collectors.schema import DATASETS, PARTITION_HOST_COLUMN, REQUIRED_COLUMNS, TIME_COLUMN
from joulehouse.settings import WarehouseSettings
from joulehouse.warehouse.build import DEVICE_LIMIT_COLUMNS, BuildError, build_day
from joulehouse.warehouse.db import connect

TS = pa.timestamp("us", tz="UTC")


def _put(lake: Path, dataset: str, host: str, columns: dict, name: str = "by-hand.parquet") -> Path:
    folder = lake / dataset / f"date={DAY.isoformat()}" / f"host={host}"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    pq.write_table(pa.table(columns), path)
    return path


def _gpu_minimal(n: int, uuid: str, **extra) -> dict:
    times = [MIDNIGHT + dt.timedelta(seconds=i) for i in range(n)]
    return {"sampled_at": pa.array(times, TS), "host": ["node-x"] * n, "gpu_index": pa.array([0] * n, pa.int64()),
            "gpu_uuid": [uuid] * n, "source": ["other-tool"] * n, **extra}


def _build(tmp_path: Path, lake: Path):
    con = connect(tmp_path / "w.duckdb", lake)
    return con, build_day(con, DAY, WarehouseSettings(), now=NOW)


def test_a_file_with_only_the_required_columns_builds_and_the_rest_is_null(tmp_path, lake):
    _put(lake, "gpu_samples", "node-x", _gpu_minimal(61, "GPU-P", power_w=pa.array([200.0] * 61, pa.float64())))
    con, built = _build(tmp_path, lake)
    assert built.clean_gpu_rows == 61
    energy_kwh, coverage = con.execute("SELECT energy_kwh, coverage_ratio FROM fct_gpu_energy_hourly").fetchone()
    assert energy_kwh * 3.6e6 == pytest.approx(200.0 * 60)
    # stg_gpu_samples leaves out the device's limits (fct_gpu_coverage_daily keeps them per GPU-day)
    optional = [f.name for f in DATASETS["gpu_samples"] if f.name not in REQUIRED_COLUMNS["gpu_samples"]
                and f.name != "power_w" and f.name not in DEVICE_LIMIT_COLUMNS]
    nulls = con.execute("SELECT " + ", ".join(f"count({c})" for c in optional) + " FROM stg_gpu_samples").fetchone()
    assert dict(zip(optional, nulls)) == {c: 0 for c in optional}


def test_files_of_one_day_may_differ_in_optional_and_extra_columns(tmp_path, lake):
    counter = pa.array([1_000_000 + 300_000 * i for i in range(61)], pa.int64())
    _put(lake, "gpu_samples", "node-x", _gpu_minimal(61, "GPU-C", energy_mj_total=counter), "a.parquet")
    _put(lake, "gpu_samples", "node-x", _gpu_minimal(
        61, "GPU-W", power_w=pa.array([100.0] * 61, pa.float32()), temp_c=pa.array([55.0] * 61, pa.float32()),
        vendor_note=["x"] * 61, mem_used_mib=pa.array([1024] * 61, pa.int64())), "b.parquet")
    con, built = _build(tmp_path, lake)
    assert built.clean_gpu_rows == 122
    energy = dict(con.execute("SELECT gpu_uuid, energy_kwh * 3.6e6 FROM fct_gpu_energy_hourly").fetchall())
    assert energy == {"GPU-C": pytest.approx(300.0 * 60), "GPU-W": pytest.approx(100.0 * 60)}
    mem = dict(con.execute("SELECT gpu_uuid, max(mem_used_mib) FROM stg_gpu_samples GROUP BY ALL").fetchall())
    assert mem == {"GPU-C": None, "GPU-W": 1024}
    assert "vendor_note" not in [r[0] for r in con.execute("DESCRIBE stg_gpu_samples").fetchall()]


def test_an_optional_column_of_nothing_but_nulls_builds(tmp_path, lake):
    """pandas writes a column of None as pyarrow's null type (INT32 in the file): read as 'a number',
    a text column such as gpu_model stopped every build of the day, naming the wrong kind."""
    _put(lake, "gpu_samples", "node-x", _gpu_minimal(61, "GPU-N", power_w=pa.array([150.0] * 61, pa.float64()),
                                                      gpu_model=pa.nulls(61), temp_c=pa.nulls(61)))
    con, built = _build(tmp_path, lake)
    assert built.clean_gpu_rows == 61
    assert con.execute("SELECT count(gpu_model), count(temp_c) FROM stg_gpu_samples").fetchone() == (0, 0)


@pytest.mark.parametrize("dropped", [*REQUIRED_COLUMNS["gpu_samples"], "power_w or energy_mj_total"])
def test_a_gpu_file_without_a_required_column_fails_the_day_naming_file_and_column(tmp_path, lake, dropped):
    columns = _gpu_minimal(5, "GPU-P", power_w=[100.0] * 5)
    for name in dropped.split(" or "):
        columns.pop(name, None)
    if dropped == "host":  # the host= partition stands for a missing host column
        _put(lake, "gpu_samples", "node-x", columns)
        assert _build(tmp_path, lake)[1].clean_gpu_rows == 5
        return
    good = _put(lake, "gpu_samples", "node-y", _gpu_minimal(5, "GPU-Q", power_w=[100.0] * 5))
    bad = _put(lake, "gpu_samples", "node-x", columns)
    with pytest.raises(BuildError) as caught:
        _build(tmp_path, lake)
    message = str(caught.value)
    assert "\n" not in message and str(bad) in message and f"required column {dropped} " in message
    assert str(good) not in message


@pytest.mark.parametrize("column, value, stored", [
    ("power_w", pa.array(["100.5"] * 5), "text"),
    ("sampled_at", pa.array(["2026-04-01T00:00:00Z"] * 5), "text"),
    ("gpu_uuid", pa.array([7] * 5, pa.int64()), "a number"),
    ("temp_c", pa.array([[55.0]] * 5), "a nested value (list or struct)"),
])
def test_a_file_storing_a_documented_column_as_another_kind_fails_the_day_naming_file_and_column(
        tmp_path, lake, column, value, stored):
    """An operator's trial: one host's file with power_w as text stopped the fleet's day on a
    binder error ('isfinite(VARCHAR)') that named neither the file nor the column."""
    _put(lake, "gpu_samples", "node-y", _gpu_minimal(5, "GPU-Q", power_w=[100.0] * 5))
    bad = _put(lake, "gpu_samples", "node-x", {**_gpu_minimal(5, "GPU-P", power_w=[100.0] * 5), column: value})
    with pytest.raises(BuildError) as caught:
        _build(tmp_path, lake)
    message = str(caught.value)
    assert "\n" not in message and f"lake file {bad}: column {column} of gpu_samples is stored as {stored}" in message


def test_numbers_of_another_width_and_a_struct_with_a_documented_name_inside_still_build(tmp_path, lake):
    """A writer's own widths (float64 power, int8 index) are the same kind of value; a nested
    column's child named like a documented column is not that column."""
    _put(lake, "gpu_samples", "node-x", {**_gpu_minimal(5, "GPU-P", power_w=pa.array([100.0] * 5, pa.float64())),
                                         "gpu_index": pa.array([0] * 5, pa.int8()),
                                         "vendor": pa.array([{"power_w": "n/a"}] * 5)})
    assert _build(tmp_path, lake)[1].clean_gpu_rows == 5


def test_a_half_precision_power_is_a_number(tmp_path, lake):
    """float16 is stored as 2-byte fixed-length bytes: refused as 'bytes', though DuckDB reads it as FLOAT."""
    import numpy as np

    _put(lake, "gpu_samples", "node-x", _gpu_minimal(61, "GPU-H", power_w=pa.array(np.full(61, 100.0, np.float16))))
    con, summary = _build(tmp_path, lake)
    assert summary.clean_gpu_rows == 61
    assert con.execute("SELECT sum(energy_kwh) * 3.6e6 FROM fct_gpu_energy_hourly").fetchone()[0] == pytest.approx(6000.0)


@pytest.mark.parametrize("stored", [pa.timestamp("ns"), pa.timestamp("ns", tz="UTC"), pa.timestamp("ms", tz="UTC"),
                                    pa.timestamp("us")], ids=str)
def test_timestamps_in_another_unit_or_without_a_zone_build_beside_the_writers_own(tmp_path, lake, stored):
    """pandas writes nanoseconds: such a file stopped the day on 'Cannot mix values of type
    TIMESTAMP_NS and TIMESTAMP WITH TIME ZONE' (or no epoch_us for TIMESTAMPTZ_NS), naming no file."""
    ours = _gpu_minimal(61, "GPU-OURS", power_w=pa.array([100.0] * 61, pa.float64()))
    _put(lake, "gpu_samples", "node-x", ours, "ours.parquet")
    theirs = _gpu_minimal(61, "GPU-THEIRS", energy_mj_total=pa.array([5_000_000 + 300_000 * i for i in range(61)]))
    naive = [t.replace(tzinfo=None) for t in theirs["sampled_at"].to_pylist()]  # UTC wall times
    theirs["sampled_at"] = pa.array(naive, pa.timestamp("us")).cast(stored)
    _put(lake, "gpu_samples", "node-y", theirs, "theirs.parquet")
    con, built = _build(tmp_path, lake)
    assert built.clean_gpu_rows == 122 and built.quarantined_gpu_rows == 0
    energy = dict(con.execute("SELECT gpu_uuid, energy_kwh * 3.6e6 FROM fct_gpu_energy_hourly").fetchall())
    assert energy == {"GPU-OURS": pytest.approx(100.0 * 60), "GPU-THEIRS": pytest.approx(300.0 * 60)}
    first = con.execute("SELECT min(sampled_at) FROM stg_gpu_samples WHERE gpu_uuid = 'GPU-THEIRS'").fetchone()[0]
    assert first == MIDNIGHT


def _minimal_rows(dataset: str, host: str) -> dict:
    """One row of `dataset` with its required columns only."""
    value = {pa.types.is_timestamp: MIDNIGHT + dt.timedelta(hours=1), pa.types.is_string: host,
             pa.types.is_integer: 0}
    schema = DATASETS[dataset]
    return {name: pa.array([next(v for test, v in value.items() if test(schema.field(name).type))],
                           schema.field(name).type) for name in REQUIRED_COLUMNS[dataset]}


@pytest.mark.parametrize("dataset", [d for d in DATASETS if d != "gpu_samples"])
def test_every_other_dataset_builds_from_its_required_columns_and_names_a_missing_one(tmp_path, lake, dataset):
    _put(lake, "gpu_samples", "node-x", _gpu_minimal(5, "GPU-P", power_w=[100.0] * 5))
    columns = _minimal_rows(dataset, "node-x")
    path = _put(lake, dataset, "node-x", columns)
    con, _ = _build(tmp_path, lake)
    got = [r[0] for r in con.execute(f"DESCRIBE raw_{dataset}").fetchall()]
    assert got == [*DATASETS[dataset].names, "date"]
    assert con.execute(f"SELECT count(*) FROM raw_{dataset}").fetchone() == (1,)
    con.close()
    host_column = PARTITION_HOST_COLUMN[dataset]
    required = [c for c in REQUIRED_COLUMNS[dataset] if c != "host" or host_column != "host"]
    dropped = TIME_COLUMN[dataset] if TIME_COLUMN[dataset] in required else required[0]
    columns.pop(dropped)
    pq.write_table(pa.table(columns), path)
    with pytest.raises(BuildError, match=f"lake file {path} lacks the required column {dropped} of {dataset}"):
        _build(tmp_path / "again" if (tmp_path / "again").mkdir() is None else tmp_path, lake)


@pytest.mark.parametrize("missing", ["sampled_at", "gpu_uuid", "source"])
def test_a_reading_without_its_time_gpu_or_source_is_quarantined_and_the_day_still_builds(tmp_path, lake, missing):
    """A NULL key in a file another tool wrote: the row belongs to no stream and no hour. It was
    kept clean, made a GPU-hour with hour_at NULL, and the blocking gate then stopped the day."""
    from joulehouse.warehouse.gate import evaluate_gate

    columns = _gpu_minimal(61, "GPU-K", power_w=pa.array([200.0] * 61, pa.float64()))
    values = columns[missing].to_pylist() if isinstance(columns[missing], pa.Array) else list(columns[missing])
    values[30] = None
    columns[missing] = pa.array(values, TS) if missing == "sampled_at" else values
    _put(lake, "gpu_samples", "node-x", columns)
    con, built = _build(tmp_path, lake)
    assert (built.clean_gpu_rows, built.quarantined_gpu_rows) == (60, 1)
    assert con.execute("SELECT reason FROM quarantine_gpu_samples").fetchall() == [("key_missing",)]
    assert con.execute("SELECT count(*) FROM fct_gpu_energy_hourly WHERE hour_at IS NULL OR gpu_uuid IS NULL"
                       ).fetchone() == (0,)
    # the interval the missing row sat in is bridged by its neighbours (2 s <= max_gap_s)
    assert con.execute("SELECT energy_kwh * 3.6e6 FROM fct_gpu_energy_hourly").fetchone()[0] == pytest.approx(200.0 * 60)
    assert all(r.success for r in evaluate_gate(con, DAY, WarehouseSettings()) if r.severity == "blocking")


def _jobs_file(lake: Path, started: dt.datetime, **drop_or_replace) -> Path:
    folder = lake / "jobs" / f"date={started.date().isoformat()}" / "host=node-x"
    folder.mkdir(parents=True, exist_ok=True)
    columns = {"job_id": ["long"], "gpu_uuid": ["GPU-J"], "started_at": pa.array([started], TS),
               "ended_at": pa.array([MIDNIGHT + dt.timedelta(hours=12)], TS)}
    for name, value in drop_or_replace.items():
        columns.pop(name) if value is None else columns.__setitem__(name, value)
    pq.write_table(pa.table(columns), folder / "scheduler.parquet")
    return folder / "scheduler.parquet"


@pytest.mark.parametrize("change, said", [({"ended_at": None}, "lacks the required column ended_at of jobs"),
                                          ({"started_at": ["2026-01-01 noon"]}, "column started_at of jobs is stored as text")])
def test_a_bad_jobs_file_days_before_the_build_stops_the_step_that_reads_it_naming_it(tmp_path, lake, change, said):
    """The build checks the day and its neighbours; the efficiency step reads job_max_days of jobs
    partitions. A jobs file 3 days back without ended_at built, and its job vanished from the facts;
    one with started_at as text stopped the power fit on a cast naming no file."""
    from joulehouse.models.day_jobs import stage_day_jobs
    from joulehouse.warehouse.lake_contract import LakeContractError

    _put(lake, "gpu_samples", "node-x", _gpu_minimal(61, "GPU-J", power_w=pa.array([100.0] * 61)))
    path = _jobs_file(lake, MIDNIGHT - dt.timedelta(days=3), **change)
    con, _ = _build(tmp_path, lake)
    with pytest.raises(LakeContractError, match=f"^lake file {path}: {said}" if "stored" in said else f"^lake file {path} {said}"):
        stage_day_jobs(con, "day_jobs_test", DAY)
    stage_day_jobs(con, "day_jobs_test", DAY, job_max_days=2)  # outside the partitions read: not its business
    assert con.execute("SELECT count(*) FROM day_jobs_test").fetchone()[0] == 0


def test_the_power_fit_reads_no_jobs_partition_its_held_out_time_cannot_reach(tmp_path, lake):
    """power_job_energy_error read raw_jobs over the whole lake: a bad file of 17 months before
    stopped every later day's fit, and every jobs file of the history was opened each day."""
    from joulehouse.models.power import fit_day
    from joulehouse.models.settings import ModelSettings

    _put(lake, "gpu_samples", "node-x", _gpu_minimal(3600, "GPU-J", power_w=pa.array([100.0 + i % 50 for i in range(3600)])))
    _jobs_file(lake, MIDNIGHT - dt.timedelta(days=500), started_at=["long ago"])
    con, _ = _build(tmp_path, lake)
    fit_day(con, DAY, ModelSettings())  # no error
    assert con.execute("SELECT count(*) FROM power_input_jobs").fetchone()[0] == 0


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_counter_that_is_not_a_number_is_quarantined_and_the_counter_bridges_it(tmp_path, lake, bad):
    """A float64 counter (pandas writes one with gaps) with NaN readings stayed clean and cut the
    counter's intervals on both sides: 300 W for 300 s read 88,800 J, not 90,000 (review, helper-86)."""
    counter = [1e9 + 300_000.0 * t for t in range(301)]
    counter[100] = counter[200] = bad
    _put(lake, "gpu_samples", "node-x", _gpu_minimal(301, "GPU-C", energy_mj_total=pa.array(counter, pa.float64())))
    con, _ = _build(tmp_path, lake)
    assert con.execute("SELECT sum(energy_kwh) * 3.6e6 FROM fct_gpu_energy_hourly").fetchone()[0] == pytest.approx(90_000.0)
    assert con.execute("SELECT reason, count(*) FROM quarantine_gpu_samples GROUP BY ALL").fetchall() == \
        [("counter_not_finite", 2)]


@pytest.mark.parametrize("narrow", [pa.float32(), pa.float16()])
def test_a_counter_stored_as_a_narrow_float_fails_the_day_naming_the_file(tmp_path, lake, narrow):
    """One such file made DuckDB read every file's counter of the day as a 32-bit float: another
    host's exact 2e13 mJ counter then read 0.2% off, in the day's readings for good (review, helper-86)."""
    import numpy as np

    exact = pa.array([2 * 10**13 + 300_000 * t for t in range(61)], pa.int64())
    _put(lake, "gpu_samples", "node-y", {**_gpu_minimal(61, "GPU-B"), "energy_mj_total": exact})
    bad = _put(lake, "gpu_samples", "node-x", _gpu_minimal(
        61, "GPU-F", energy_mj_total=pa.array(np.arange(61, dtype=np.float64) * 3000.0).cast(narrow)))
    with pytest.raises(BuildError) as caught:
        _build(tmp_path, lake)
    message = str(caught.value)
    assert "\n" not in message and f"lake file {bad}: counter energy_mj_total of gpu_samples is stored as a 16- or " \
        "32-bit float" in message
