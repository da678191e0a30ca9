"""A facility meter written by hand into raw_facility_samples and integrated by the warehouse's
own fct_pue_hourly, as a build would: the demand tests' meter."""

from __future__ import annotations

import datetime as dt

import duckdb

from accounting_world import DAY, at
from joulehouse.warehouse.sqlio import SqlFiles

GAP_S = 120.0  # [warehouse] max_meter_gap_s's default
IT_W = 2000.0
WAREHOUSE_SQL = SqlFiles("joulehouse.warehouse", "sql")


def spike(base_w: float, spike_w: float, start_hour: float, end_hour: float, day: dt.date = DAY):
    """Facility power: `spike_w` from start_hour to end_hour inclusive, `base_w` elsewhere."""
    return lambda t: spike_w if at(start_hour, day) <= t <= at(end_hour, day) else base_w


def add_meter(con: duckdb.DuckDBPyConnection, facility_w, day: dt.date = DAY, missing=()) -> None:
    """A facility meter read once a minute over `day` (and two minutes either side) at
    facility_w(t) W, IT at IT_W, except at the times in `missing`; fct_pue_hourly of the day
    rebuilt from it by the warehouse's SQL."""
    if not con.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'raw_facility_samples'"
                       ).fetchone()[0]:
        con.execute("CREATE TABLE raw_facility_samples (sampled_at TIMESTAMPTZ, site VARCHAR, facility_power_w DOUBLE, "
                    "it_power_w DOUBLE, outdoor_temp_c DOUBLE, source VARCHAR, date DATE)")
        con.execute("DELETE FROM fct_pue_hourly")
    times = [at(0, day) + dt.timedelta(minutes=m) for m in range(-2, 24 * 60 + 3)]
    con.executemany("INSERT INTO raw_facility_samples VALUES (?, 'site-a', ?, ?, NULL, 'meter', ?)",
                    [(t, facility_w(t), IT_W, t.date()) for t in times if t not in set(missing)])
    con.execute("INSERT INTO fct_pue_hourly SELECT hour_at, site, pue, it_energy_kwh, facility_energy_kwh, coverage_ratio "
                f"FROM ({WAREHOUSE_SQL.body('fct_pue_hourly')})",
                {"day": day, "margin_s": GAP_S, "max_meter_gap_s": GAP_S, "meter_bucket_s": 3600})


def copy_gpu_hours(con: duckdb.DuckDBPyConnection, day: dt.date) -> None:
    """DAY's GPU-hours again on `day` (the same draw, no job)."""
    shift = day - DAY
    con.execute("INSERT INTO fct_gpu_energy_hourly SELECT hour_at + ?, day + ?, host, gpu_uuid, gpu_model, energy_kwh, "
                "avg_power_w, coverage_ratio, energy_source FROM fct_gpu_energy_hourly WHERE day = ?",
                [shift, shift.days, DAY])
