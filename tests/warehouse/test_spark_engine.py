"""Spark and DuckDB give the same numbers on the same simulated lake: the quarantine reasons,
hourly GPU energy, the power model's sufficient statistics (with and without clock readings) and
the daily rollup. Spark runs the SQL that warehouse/spark_dialect.py renders from the DuckDB files
(tests/warehouse/test_spark_dialect.py checks it renders, without Spark). PySpark runs local[2];
the test is skipped where pyspark or Java is missing."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pyarrow as pa
import pytest

from joulehouse.settings import ModelSettings, WarehouseSettings
from joulehouse.collectors.writer import write_dataset
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect
from spark_day import simulated_day_without

DAY = dt.date(2026, 1, 2)
NOW = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.filterwarnings("ignore:PySpark does not yet fully support pandas")]


def _duckdb_suffstats(con, models: ModelSettings) -> pl.DataFrame:
    from joulehouse.models.power import build_power_features, suffstats_rows

    build_power_features(con, DAY, models)
    return pl.DataFrame(suffstats_rows(con, models))


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("spark")
    # The second host's readings lose their clocks: the no-clock fit path (activity exponent and
    # decay grid, expanded per row) runs on both engines too.
    summary, table = simulated_day_without(root / "sim", DAY, "sm_clock_mhz")
    from joulehouse.warehouse import spark_engine

    # Every GPU is also read by NVML every 3 s, without DCGM's fields: two streams per GPU, NVML's 9
    # times as many rows. Both engines must fit on the same one (models/sql/gpu_activity_streams.sql):
    # counted row by row, SM activity would be on a tenth of the rows and the fit would drop it.
    nvml = pa.concat_tables([
        table.set_column(table.schema.get_field_index("sampled_at"), table.schema.field("sampled_at"),
                         pa.compute.add(table.column("sampled_at"), pa.scalar(dt.timedelta(seconds=3 * k))))
        for k in range(1, 10)])
    for name in ("sm_active_ratio", "sm_occupancy_ratio", "tensor_active_ratio", "dram_active_ratio"):
        i = nvml.schema.get_field_index(name)
        nvml = nvml.set_column(i, nvml.schema.field(i), pa.nulls(nvml.num_rows, nvml.schema.field(i).type))
    i = nvml.schema.get_field_index("source")
    nvml = nvml.set_column(i, nvml.schema.field(i), pa.array(["nvml-extra"] * nvml.num_rows, nvml.schema.field(i).type))
    table = _stepped_back(table)
    write_dataset(root / "lake", "gpu_samples", pa.concat_tables([table, nvml, _broken_readings(table)]))
    write_dataset(root / "lake", "gpu_samples", _held_counter())
    warehouse, models = WarehouseSettings(inventory_path=str(summary.inventory_path)), ModelSettings(history_days=3)
    con = connect(root / "w.duckdb", root / "lake")
    build_day(con, DAY, warehouse, now=NOW)
    spark = spark_engine.spark_session("local[2]")
    try:
        result = spark_engine.run_day(spark, root / "lake", DAY, warehouse, models, now=NOW)
        spark_engine.check_samples(spark, DAY, warehouse, NOW)
        checked = spark_engine._frame(spark.sql(
            "SELECT reason, in_inventory, count(*) AS n FROM int_gpu_samples_checked WHERE day = :day "
            "GROUP BY reason, in_inventory", args={"day": DAY}), ["reason", "in_inventory"])
    finally:
        spark.stop()
    yield con, models, result, checked
    con.close()


def _stepped_back(table: pa.Table) -> pa.Table:
    """One GPU's counter steps back 1 J below the reading before it on every third reading from
    13:00 (two series of it mixed), and the engines must drop those readings alike."""
    frame = pl.from_arrow(table).with_row_index("row")
    gpu = frame["gpu_uuid"][0]
    stream = frame.filter((pl.col("gpu_uuid") == gpu) & (pl.col("sampled_at").dt.hour() == 13)
                          & pl.col("energy_mj_total").is_not_null()).sort("sampled_at")
    assert stream.height > 30, "the simulated day has no counter to step back"
    dipped = {row: previous - 1000 for k, (row, previous) in
              enumerate(zip(stream["row"][1:], stream["energy_mj_total"][:-1])) if k % 3 == 0}
    counter = [dipped.get(i, c) for i, c in enumerate(table.column("energy_mj_total").to_pylist())]
    i = table.schema.get_field_index("energy_mj_total")
    return table.set_column(i, table.schema.field(i), pa.array(counter, table.schema.field(i).type))


HELD_GPU = "GPU-held"


def _held_counter() -> pa.Table:
    """A GPU read by Prometheus every 10 s from 01:00 for an hour at 300 W, its counter collected
    every 30 s (repeats), one scrape in ten after a collection without the counter: the repeat runs
    and the run after a gap run on both engines."""
    from warehouse_lakes import gpu_rows

    counter = lambda t: None if t % 300 == 30 else 10**12 + round((t - t % 30) * 300.0 * 1000)  # noqa: E731
    return pa.Table.from_pylist(gpu_rows(range(3600, 7201, 10), 300.0, counter_mj=counter, uuid=HELD_GPU,
                                         host="node-held", source="dcgm", limit_w=700.0))


def _broken_readings(table: pa.Table) -> pa.Table:
    """One reading of one GPU at noon, copied to break each quarantine rule once (a second
    reading of the same key, NaN, negative, mW as W, too hot, a ratio over 1)."""
    noon = [r for r in table.to_pylist() if r["sampled_at"].hour == 12][0]
    step = dt.timedelta(seconds=1)
    broken = [
        {**noon, "power_w": noon["power_w"] + 1.0},
        {**noon, "sampled_at": noon["sampled_at"] + 1 * step, "power_w": float("nan")},
        {**noon, "sampled_at": noon["sampled_at"] + 2 * step, "power_w": -5.0},
        {**noon, "sampled_at": noon["sampled_at"] + 3 * step, "power_w": noon["power_w"] * 1000},
        {**noon, "sampled_at": noon["sampled_at"] + 4 * step, "temp_c": 500.0},
        {**noon, "sampled_at": noon["sampled_at"] + 5 * step, "sm_active_ratio": 1.5},
    ]
    return pa.Table.from_pylist(broken, schema=table.schema)


def test_hourly_gpu_energy_is_the_same_on_both_engines(engines):
    con, _, result, _ = engines
    cur = con.execute("SELECT hour_at, gpu_uuid, gpu_model, energy_kwh, coverage_ratio, energy_source, source, "
                      "n_samples FROM fct_gpu_energy_hourly WHERE day = ? ORDER BY gpu_uuid, hour_at", [DAY])
    duck = pl.DataFrame(cur.fetchall(), schema=[d[0] for d in cur.description], orient="row")
    spark = result.gpu_energy_hourly.sort("gpu_uuid", "hour_at")
    held = duck.filter(pl.col("gpu_uuid") == HELD_GPU)
    assert held.height == 2 and held["energy_kwh"][0] * 3.6e6 == pytest.approx(300.0 * 3600, rel=1e-9)
    assert duck.height == spark.height == 16 * 24 + 2
    for column in ("hour_at", "gpu_uuid", "gpu_model", "energy_source", "source", "n_samples"):
        assert spark[column].to_list() == duck[column].to_list(), column
    for column in ("energy_kwh", "coverage_ratio"):
        for s, d in zip(spark[column].to_list(), duck[column].to_list()):
            assert (s is None and d is None) or s == pytest.approx(d, rel=1e-9, abs=0.0), column
    assert spark["energy_kwh"].min() > 0  # the held GPU's last reading starts an hour it does not cover: NULL


def test_power_model_sums_are_the_same_on_both_engines(engines):
    con, models, result, _ = engines
    keys = ["gpu_model", "alpha", "activity_exponent", "activity_hold_s"]
    duck = _duckdb_suffstats(con, models).sort(keys)
    spark = result.power_suffstats.sort(keys)
    assert duck.height == spark.height > models.alpha_count  # both fit paths produced shapes
    assert spark.columns == duck.columns
    assert spark.select(keys + ["feature_set", "n"]).equals(duck.select(keys + ["feature_set", "n"]))
    for column in [c for c in duck.columns if c.startswith(("xtx_", "xty_", "yty"))]:
        for s, d in zip(spark[column].to_list(), duck[column].to_list()):
            assert s == pytest.approx(d, rel=1e-6, abs=1e-9), column


def test_daily_rollup_adds_up_to_the_hourly_energy(engines):
    con, _, result, _ = engines
    duck = dict(con.execute("SELECT host || '/' || gpu_model, sum(energy_kwh) FROM fct_gpu_energy_hourly "
                            "WHERE day = ? GROUP BY ALL", [DAY]).fetchall())
    daily = result.gpu_energy_daily
    assert daily["n_gpus"].sum() == 16 + 1  # and the held GPU
    for row in daily.iter_rows(named=True):
        assert row["energy_kwh"] == pytest.approx(duck[f"{row['host']}/{row['gpu_model']}"], rel=1e-9)
        assert 0 < row["avg_power_w"] < 700


def test_quarantine_reasons_and_inventory_flags_are_the_same_on_both_engines(engines):
    con, _, _, spark = engines
    cur = con.execute("SELECT reason, in_inventory, count(*) AS n FROM ("
                      " SELECT NULL AS reason, in_inventory FROM stg_gpu_samples WHERE day = $day"
                      " UNION ALL SELECT reason, in_inventory FROM quarantine_gpu_samples WHERE day = $day) "
                      "GROUP BY ALL ORDER BY reason NULLS LAST, in_inventory", {"day": DAY})
    duck = pl.DataFrame(cur.fetchall(), schema=[d[0] for d in cur.description], orient="row")
    assert spark.sort("reason", "in_inventory", nulls_last=True).rows() == duck.rows()
    reasons = {r for r in duck["reason"].to_list() if r is not None}
    assert reasons >= {"duplicate_key", "power_not_finite", "power_negative", "power_unit_mw",
                       "temp_out_of_range", "ratio_out_of_range"}
