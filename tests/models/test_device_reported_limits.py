"""The limits a device reports of itself (NVML's default limit and limit constraints, written by the
NVML collector beside each reading) reach the recommender through the warehouse and stand over
the catalogue and the heuristics: a 500 W board under a 400 W catalogue name keeps its 500 W
default and its own 200 W minimum on the day it is capped as on the day before, and an unknown
model's minimum is the one it reports, not half its limit. A file without the columns builds, the
limits NULL. Lake files are written by hand with pyarrow, the warehouse built from them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from joulehouse.models.coefficients import PowerCoefficients
from joulehouse.models.device_limits import device_limits_w, reported_limits_w
from joulehouse.models.recommend import recommend_gpu
from joulehouse.models.recommend_inputs import gpu_day_profiles
from joulehouse.settings import RecommendSettings, WarehouseSettings
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

TS = pa.timestamp("us", tz="UTC")
DAY_1 = dt.date(2026, 3, 2)
DAY_2 = DAY_1 + dt.timedelta(days=1)
NOW = dt.datetime(2026, 3, 6, tzinfo=dt.timezone.utc)
A100 = "NVIDIA A100-SXM4-80GB"  # the catalogue: default 400 W, min 100 W, max 400 W
UNKNOWN = "NVIDIA Quux 9000"  # not in the catalogue
STEP_S = 10
BUSY_HOURS = 20
SM_ACTIVE = 0.5
# hand-made coefficients; a low activity and no value of time: energy falls all the way to the floor
COEF = PowerCoefficients(static_w=60, temp_w_per_c=0.0, dyn_w=400, dyn_freq_exponent=3.0, mem_w=40,
                         pcie_w_per_gbps=0.0, f_max_mhz=1410)
FIT = COEF.as_row() | {"passed_gate": True, "feature_set": "dcgm", "gate_reason": None}
# below the device's own 200 W minimum at a 500 W default: the floor is the device's minimum
SETTINGS = RecommendSettings(holdout_share=0.0, min_limit_share_of_default=0.3, value_of_time_usd_per_gpu_hour=0.0)


def _readings(day: dt.date, uuid: str, model: str, limit_w: float, source: str = "nvml",
              device_w: tuple[float, float, float] | None = None, sm_active: float = SM_ACTIVE) -> pa.Table:
    """A GPU's day read every STEP_S s: busy for BUSY_HOURS at `sm_active`, then idle; power under
    its limit. `device_w` (default, min, max) W: the device's own limits on every row; None: the
    file has no such columns (DCGM, another tool)."""
    start = dt.datetime.combine(day, dt.time(), dt.timezone.utc)
    n = 86400 // STEP_S
    busy = [i * STEP_S < BUSY_HOURS * 3600 for i in range(n)]
    columns = {
        "sampled_at": pa.array([start + dt.timedelta(seconds=i * STEP_S) for i in range(n)], TS),
        "host": ["node-a"] * n, "gpu_index": pa.array([0] * n, pa.int16()), "gpu_uuid": [uuid] * n,
        "gpu_model": [model] * n,
        "power_w": pa.array([min(limit_w, 80.0 + 300.0 * sm_active) if b else 70.0 for b in busy], pa.float32()),
        "temp_c": pa.array([60.0] * n, pa.float32()),
        "sm_active_ratio": pa.array([sm_active if b else 0.0 for b in busy], pa.float32()),
        "dram_active_ratio": pa.array([0.2 if b else 0.0 for b in busy], pa.float32()),
        "power_limit_w": pa.array([limit_w] * n, pa.float32()),
        "source": [source] * n,
    }
    if device_w is not None:
        for name, w in zip(("power_limit_default_w", "power_limit_min_w", "power_limit_max_w"), device_w):
            columns[name] = pa.array([w] * n, pa.float32())
    return pa.table(columns)


def _put(lake: Path, day: dt.date, host: str, table: pa.Table, name: str) -> None:
    folder = lake / "gpu_samples" / f"date={day.isoformat()}" / f"host={host}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / name)


def _coverage(con, day: dt.date) -> dict[str, tuple]:
    return {u: (d, lo, hi) for u, d, lo, hi in con.execute(
        "SELECT gpu_uuid, power_limit_default_w, power_limit_min_w, power_limit_max_w "
        "FROM fct_gpu_coverage_daily WHERE day = ?", [day]).fetchall()}


def _recommended(con, day: dt.date) -> dict[str, dict]:
    profiles = gpu_day_profiles(con, day, fits={A100: FIT, UNKNOWN: FIT})
    return {p["gpu_uuid"]: recommend_gpu(p, "background", FIT, SETTINGS, price_usd_per_kwh=0.1,
                                         carbon_gco2e_per_kwh=400.0, carbon_price_usd_per_tco2e=0.0, pue=1.3,
                                         p95_power_w=lambda: None)
            for p in profiles}


@pytest.mark.slow
def test_the_device_reported_default_and_minimum_stand_before_and_after_a_cap(tmp_path):
    """Before: the 500 W board's day-1 default came from its readings (500 W) but its floor from the
    catalogue's 100 W minimum: a 175 W cap, below what the device accepts; on day 2, read under the
    agent's 300 W cap, its default fell to the catalogue's 400 W."""
    lake = tmp_path / "lake"
    device_w = (500.0, 200.0, 500.0)
    _put(lake, DAY_1, "node-a", _readings(DAY_1, "GPU-HGX", A100, 500.0, device_w=device_w), "nvml.parquet")
    _put(lake, DAY_2, "node-a", _readings(DAY_2, "GPU-HGX", A100, 300.0, device_w=device_w), "nvml.parquet")
    con = connect(tmp_path / "w.duckdb", lake)
    rows = {}
    for day in (DAY_1, DAY_2):
        build_day(con, day, WarehouseSettings(), now=NOW)
        assert _coverage(con, day) == {"GPU-HGX": device_w}
        rows[day] = _recommended(con, day)["GPU-HGX"]
    for day, row in rows.items():
        assert row["default_limit_w"] == 500.0, (day, row["reason"])
        assert row["power_limit_w"] == 200.0, (day, row["reason"])  # the cheapest cap, at the device's floor
        assert "limits as the device reports them (NVML): default 500 W, min 200 W" in row["reason"], day
    assert {k: v for k, v in rows[DAY_1].items() if k != "reason"} == {k: v for k, v in rows[DAY_2].items() if k != "reason"}


def test_a_file_without_the_device_columns_builds_and_its_limits_are_null(tmp_path):
    lake = tmp_path / "lake"
    _put(lake, DAY_1, "node-a", _readings(DAY_1, "GPU-NVML", A100, 400.0, device_w=(400.0, 100.0, 400.0)),
         "nvml.parquet")
    _put(lake, DAY_1, "node-b", _readings(DAY_1, "GPU-DCGM", A100, 400.0, source="dcgm"), "dcgm.parquet")
    con = connect(tmp_path / "w.duckdb", lake)
    built = build_day(con, DAY_1, WarehouseSettings(), now=NOW)
    assert built.clean_gpu_rows == 2 * 86400 // STEP_S
    assert _coverage(con, DAY_1) == {"GPU-NVML": (400.0, 100.0, 400.0), "GPU-DCGM": (None, None, None)}
    # the catalogue's own limits, reported or not: the same recommendation, nothing to say of them
    recommended = _recommended(con, DAY_1)
    nvml, dcgm = recommended["GPU-NVML"], recommended["GPU-DCGM"]
    assert nvml["default_limit_w"] == 400.0 and "NVML" not in nvml["reason"]
    assert {k: v for k, v in nvml.items() if k not in ("gpu_uuid", "host")} == \
        {k: v for k, v in dcgm.items() if k not in ("gpu_uuid", "host")}


def test_a_warehouse_built_before_the_device_columns_builds_its_next_day_with_them(tmp_path):
    """The day tables of a warehouse built before the columns lack them; its next build stopped on
    an INSERT naming a column the table does not have, when quarantined rows carried them too."""
    lake = tmp_path / "lake"
    for day in (DAY_1, DAY_2):
        readings = _readings(day, "GPU-HGX", A100, 500.0, device_w=(500.0, 200.0, 500.0))
        negative = pa.array([-1.0] * 5 + readings.column("power_w").to_pylist()[5:], pa.float32())
        _put(lake, day, "node-a", readings.set_column(readings.schema.get_field_index("power_w"), "power_w", negative),
             "nvml.parquet")
    con = connect(tmp_path / "w.duckdb", lake)
    build_day(con, DAY_1, WarehouseSettings(), now=NOW)
    for table in ("fct_gpu_coverage_daily", "quarantine_gpu_samples"):  # as built before the columns
        for column in ("power_limit_default_w", "power_limit_min_w", "power_limit_max_w"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN IF EXISTS {column}")
    built = build_day(con, DAY_2, WarehouseSettings(), now=NOW)
    assert built.quarantined_gpu_rows == 5
    assert _coverage(con, DAY_1) == {"GPU-HGX": (None, None, None)}
    assert _coverage(con, DAY_2) == {"GPU-HGX": (500.0, 200.0, 500.0)}

def test_an_unknown_model_takes_the_minimum_it_reports_not_half_its_limit(tmp_path):
    """Before: its minimum was 50% of the 400 W it was read at, a 200 W floor the device does not
    have, and with no cap down to 150 W it was given a clock lock at 400 W instead."""
    lake = tmp_path / "lake"
    readings = _readings(DAY_1, "GPU-Q", UNKNOWN, 400.0, device_w=(400.0, 150.0, 450.0), sm_active=0.3)
    _put(lake, DAY_1, "node-a", readings, "nvml.parquet")
    con = connect(tmp_path / "w.duckdb", lake)
    build_day(con, DAY_1, WarehouseSettings(), now=NOW)
    row = _recommended(con, DAY_1)["GPU-Q"]
    assert row["default_limit_w"] == 400.0
    assert row["power_limit_w"] == 150.0, row["reason"]
    assert "limits as the device reports them (NVML): default 400 W, min 150 W, max 450 W" in row["reason"]


def test_each_figure_the_device_reports_stands_and_the_rules_fill_the_rest():
    # only the constraints reported (the default call unsupported): the default from the readings' rule
    assert device_limits_w(A100, 500.0, reported_w=(None, 200.0, 500.0))[:3] == (500.0, 200.0, 500.0)
    # only the default: the catalogue's minimum, the maximum at least the default
    assert device_limits_w(A100, 300.0, reported_w=(500.0, None, None))[:3] == (500.0, 100.0, 500.0)
    # the catalogue's own figures, reported: no note
    assert device_limits_w(A100, 400.0, reported_w=(400.0, 100.0, 400.0)) == (400.0, 100.0, 400.0, None)
    # a value not above 0 W, or not finite, is no report
    assert reported_limits_w({"power_limit_default_w": 0.0, "power_limit_min_w": float("nan"),
                              "power_limit_max_w": None}) == (None, None, None)
    with pytest.raises(ValueError, match="minimum limit above its default"):
        device_limits_w(A100, 400.0, reported_w=(300.0, 350.0, 400.0))


@pytest.mark.slow
@pytest.mark.integration
def test_spark_reads_a_lake_without_the_device_columns_as_the_duckdb_build_does(tmp_path, monkeypatch):
    """Spark's lake view is the files' own schema: a file without an optional column (the device's
    limits, which stg_gpu_samples names to leave them out; a counter DCGM does not read) failed the
    relations on Spark where DuckDB's lake contract reads NULL."""
    pytest.importorskip("pyspark")
    from joulehouse.warehouse import spark_engine

    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    lake = tmp_path / "lake"
    _put(lake, DAY_1, "node-a", _readings(DAY_1, "GPU-DCGM", A100, 400.0, source="dcgm"), "dcgm.parquet")
    spark = spark_engine.spark_session("local[1]")
    try:
        spark_engine.register_lake(spark, lake)
        spark_engine.register_inventory(spark, WarehouseSettings())
        clean = spark_engine.clean_samples(spark, DAY_1, DAY_1, WarehouseSettings(), NOW)
        assert clean.count() == 86400 // STEP_S
        assert spark.sql("SELECT count(power_limit_default_w) AS n FROM raw_gpu_samples").collect()[0]["n"] == 0
    finally:
        spark.stop()
