"""One activity stream per GPU and day (models/sql/gpu_activity_samples.sql): a GPU read by NVML
every second and by DCGM through Prometheus every 15 s (the README's node setup) has its activity
taken from one of them, in one measure, never a row-by-row mix of the two."""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
import pytest

from joulehouse.models.activity import create_activity_view
from joulehouse.models.recommend_inputs import create_covered_hours_inputs
from joulehouse.models.sql import load_sql
from joulehouse.warehouse.sqlio import records

DAY = dt.date(2026, 3, 2)
START = dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc)
MODEL = "NVIDIA H100 80GB HBM3"


def _stream(uuid: str, source: str, every_s: int, *, util_pct: float | None, sm_active: float | None,
            seconds: int = 3600, model: str = MODEL) -> list[dict]:
    return [{"day": DAY, "host": "node-01", "gpu_uuid": uuid, "gpu_model": model, "source": source,
             "sampled_at": START + dt.timedelta(seconds=t), "power_w": 300.0,
             "util_gpu_pct": util_pct, "sm_active_ratio": sm_active,
             "util_mem_pct": None if util_pct is None else 40.0,
             "dram_active_ratio": None if sm_active is None else 0.2, "temp_c": 60.0, "power_limit_w": 700.0,
             "pcie_tx_bytes_per_s": 0, "pcie_rx_bytes_per_s": 0, "sm_clock_mhz": 1980, "clock_event_reasons": 0}
            for t in range(0, seconds, every_s)]


def _con(*streams: list[dict]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    schema = pa.schema([("day", pa.date32()), ("host", pa.string()), ("gpu_uuid", pa.string()),
                        ("gpu_model", pa.string()), ("source", pa.string()), ("sampled_at", pa.timestamp("us", "UTC")),
                        ("power_w", pa.float32()), ("util_gpu_pct", pa.float32()), ("sm_active_ratio", pa.float32()),
                        ("util_mem_pct", pa.float32()), ("dram_active_ratio", pa.float32()), ("temp_c", pa.float32()),
                        ("power_limit_w", pa.float32()), ("pcie_tx_bytes_per_s", pa.int64()),
                        ("pcie_rx_bytes_per_s", pa.int64()), ("sm_clock_mhz", pa.int32()),
                        ("clock_event_reasons", pa.int64())])
    con.register("rows", pa.Table.from_pylist([r for s in streams for r in s], schema))
    con.execute("CREATE TABLE stg_gpu_samples AS SELECT * FROM rows")
    create_activity_view(con, DAY)
    return con


def _chosen(con) -> dict[str, tuple]:
    return {u: (src, kind, n, act) for u, src, kind, n, act in con.execute(
        "SELECT gpu_uuid, any_value(source), any_value(activity_kind), count(*), avg(activity_ratio) "
        "FROM gpu_activity_samples GROUP BY gpu_uuid").fetchall()}


def test_nvml_every_second_and_dcgm_every_15_s_give_dcgm_sm_activity_alone():
    # NVML: a kernel ran all the time (90%); DCGM: 40% of the SMs busy. DCGM's stream carries SM
    # activity: it is the GPU's stream, though NVML's rows outnumber it 15 to 1.
    con = _con(_stream("GPU-a", "nvml", 1, util_pct=90.0, sm_active=None),
               _stream("GPU-a", "dcgm", 15, util_pct=90.0, sm_active=0.4))
    source, kind, n, activity = _chosen(con)["GPU-a"]
    assert (source, kind, n) == ("dcgm", "sm_active", 240)
    assert activity == pytest.approx(0.4)  # the row-by-row coalesce gave (3600 x 0.9 + 240 x 0.4) / 3840 = 0.869


def test_two_streams_without_sm_activity_give_the_one_with_most_utilisation_readings():
    con = _con(_stream("GPU-a", "nvml", 1, util_pct=90.0, sm_active=None),
               _stream("GPU-a", "dcgm", 15, util_pct=None, sm_active=None))
    assert _chosen(con)["GPU-a"][:3] == ("nvml", "util_gpu", 3600)


def test_dcgm_read_every_second_gives_sm_activity_from_dcgm_alone():
    con = _con(_stream("GPU-a", "dcgm", 1, util_pct=90.0, sm_active=0.4),
               _stream("GPU-a", "nvml", 10, util_pct=90.0, sm_active=None))
    source, kind, n, activity = _chosen(con)["GPU-a"]
    assert (source, kind, n) == ("dcgm", "sm_active", 3600)
    assert activity == pytest.approx(0.4)
    memory = con.execute("SELECT DISTINCT memory_ratio FROM gpu_activity_samples").fetchall()
    assert memory == [(pytest.approx(0.2),)]  # DRAM activity with SM activity, never NVML's memory utilisation


def test_a_gpu_without_dcgm_in_a_fleet_that_has_it_keeps_its_utilisation():
    # Most of the model's readings carry SM activity, but GPU-b is read by NVML only: its activity
    # is its utilisation, not NULL (which would make it look idle).
    con = _con(_stream("GPU-a", "dcgm", 1, util_pct=80.0, sm_active=0.5),
               _stream("GPU-b", "nvml", 1, util_pct=70.0, sm_active=None, seconds=600))
    chosen = _chosen(con)
    assert chosen["GPU-a"][:2] == ("dcgm", "sm_active") and chosen["GPU-a"][3] == pytest.approx(0.5)
    assert chosen["GPU-b"][:2] == ("nvml", "util_gpu") and chosen["GPU-b"][3] == pytest.approx(0.7)


def test_busy_hours_and_mean_activity_count_the_gpus_time_once():
    # NVML: utilisation 90% every second; DCGM every 15 s: SM activity 0.5, the GPU's stream. Mixed row
    # by row, the day's mean activity was (3600 x 0.9 + 240 x 0.5) / 3840 = 0.875 over 3840 "samples".
    con = _con(_stream("GPU-a", "nvml", 1, util_pct=90.0, sm_active=None),
               _stream("GPU-a", "dcgm", 15, util_pct=90.0, sm_active=0.5))
    create_covered_hours_inputs(con)  # no fct_gpu_coverage_daily here: the span of the readings
    (busy_hours, mean_activity), = con.execute(
        f"SELECT busy_hours, mean_activity_ratio FROM ({load_sql('placement_gpu_day')})", {"day": DAY}).fetchall()
    assert busy_hours == pytest.approx(3585 / 3600)  # DCGM's readings span 0..3585 s
    assert mean_activity == pytest.approx(0.5)
    con.execute("CREATE TEMP VIEW reco_input_samples AS SELECT * FROM gpu_activity_samples")
    # no model fitted: the tenths are of the stream's activity
    profile = con.execute(load_sql("recommend_gpu_profile"), {"day": DAY, "sm_active_models": [],
                                                              "util_gpu_models": []}).fetchall()
    names = [d[0] for d in con.description]
    row = dict(zip(names, profile[0]))
    assert row["n_samples"] == 240 and row["busy_ratio"] == 1.0
    assert row["activity_deciles"] == pytest.approx([0.5] * 10)


def test_a_relation_without_source_or_dcgm_columns_is_read_as_one_stream():
    con = duckdb.connect()
    con.execute("CREATE TABLE imported AS SELECT DATE '2026-03-02' AS day, 'GPU-a' AS gpu_uuid, "
                "TIMESTAMPTZ '2026-03-02 00:00:00+00' + to_seconds(i) AS sampled_at, 250.0 AS power_w, "
                "CAST(i % 100 AS FLOAT) AS util_gpu_pct FROM range(100) AS t(i)")
    create_activity_view(con, DAY, samples_relation="imported")
    assert con.execute("SELECT count(*), avg(activity_ratio), any_value(activity_kind) "
                       "FROM gpu_activity_samples").fetchone() == (100, pytest.approx(0.495), "util_gpu")


def test_a_missing_relation_is_a_clear_error():
    with pytest.raises(ValueError, match="'stg_gpu_samples' is missing"):
        create_activity_view(duckdb.connect(), DAY)


def test_a_fit_on_another_relation_leaves_the_activity_view_on_its_own():
    """Both choose streams over a temp view: the fit's must not redirect gpu_activity_samples."""
    from joulehouse.models.power import input_view

    con = _con(_stream("GPU-a", "dcgm", 15, util_pct=90.0, sm_active=0.4))
    con.execute("CREATE TABLE imported AS SELECT * FROM stg_gpu_samples WHERE false")
    input_view(con, "imported", DAY, DAY)
    assert con.execute("SELECT count(*) FROM gpu_activity_samples").fetchone() == (240,)


def test_samples_without_an_activity_reading_are_not_idle_hours():
    """GPU-a is busy (SM activity 0.5) on every reading it has, but its last 20 minutes carry no
    SM activity. Counted as idle they made 0.67 of its hour active (outcome_gpu_day, the energy
    per active hour of the savings' fallback 1.5x) and 0.67 h busy (placement_gpu_day)."""
    rows = _stream("GPU-a", "dcgm", 1, util_pct=None, sm_active=0.5)
    rows = [r | {"sm_active_ratio": None} if r["sampled_at"] >= START + dt.timedelta(seconds=2400) else r for r in rows]
    con = _con(rows)
    span_h = 3599 / 3600
    create_covered_hours_inputs(con)
    (busy_hours,), = con.execute(f"SELECT busy_hours FROM ({load_sql('placement_gpu_day')})", {"day": DAY}).fetchall()
    assert busy_hours == pytest.approx(span_h)
    from joulehouse.models.outcome import EMPTY_JOBS

    con.execute(EMPTY_JOBS)
    con.execute("CREATE TABLE fct_gpu_energy_hourly (gpu_uuid VARCHAR, day DATE, energy_kwh DOUBLE)")
    con.execute("INSERT INTO fct_gpu_energy_hourly VALUES ('GPU-a', ?, 0.3)", [DAY])
    (active_hours,), = con.execute(f"SELECT active_hours FROM ({load_sql('outcome_gpu_day')})",
                                   {"first_day": DAY, "day": DAY}).fetchall()
    assert active_hours == pytest.approx(span_h)


@pytest.mark.parametrize("busy_hours", [20, 10])
def test_the_savings_fallback_prices_the_busy_hours_alone(busy_hours):
    """The GPU-day fallback divided the whole day's energy (idle hours included) by the busy hours:
    250 W busy and 60 W idle read 262 Wh per active hour when busy 20 h and 334 when busy 10 h, so
    a cap that never bound, on a day of less work, read as a 27% loss."""
    from joulehouse.models.outcome import EMPTY_JOBS, _unit

    rows = [r | {"power_w": 250.0 if t < busy_hours * 3600 else 60.0, "util_gpu_pct": 80.0 if t < busy_hours * 3600 else 0.0}
            for r in _stream("GPU-a", "nvml", 60, util_pct=80.0, sm_active=None, seconds=86400)
            for t in [(r["sampled_at"] - START).total_seconds()]]
    con = _con(rows)
    con.execute(EMPTY_JOBS)
    day_kwh = (busy_hours * 250.0 + (24 - busy_hours) * 60.0) / 1000
    con.execute("CREATE TABLE fct_gpu_energy_hourly (gpu_uuid VARCHAR, day DATE, energy_kwh DOUBLE)")
    con.execute("INSERT INTO fct_gpu_energy_hourly VALUES ('GPU-a', ?, ?)", [DAY, day_kwh])
    (day,) = records(con.execute(load_sql("outcome_gpu_day"), {"first_day": DAY, "day": DAY}))
    _, energy, work, _ = _unit([day])
    assert day["energy_kwh"] == pytest.approx(day_kwh)
    assert day[energy] / day[work] == pytest.approx(0.250, rel=1e-9)  # kWh per busy hour, whatever the load
