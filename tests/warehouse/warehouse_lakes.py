"""Tiny hand-computable lakes for the warehouse tests, built through the collectors' writer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from pathlib import Path

import pyarrow as pa
import pytest

from joulehouse.settings import WarehouseSettings
from joulehouse.collectors.writer import write_dataset
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

UTC = dt.timezone.utc
DAY = dt.date(2026, 1, 2)
MIDNIGHT = dt.datetime(2026, 1, 2, tzinfo=UTC)
NOW = dt.datetime(2026, 1, 10, tzinfo=UTC)
MODEL = "NVIDIA H100 80GB HBM3"


def at(seconds: float, base: dt.datetime = MIDNIGHT) -> dt.datetime:
    return base + dt.timedelta(seconds=seconds)


def gpu_rows(
    times_s: Iterable[float],
    power_w: Callable[[float], float | None] | float | None = 100.0,
    *,
    counter_mj: Callable[[float], int | None] | None = None,
    uuid: str = "GPU-0",
    host: str = "node-01",
    source: str = "nvml",
    limit_w: float | None = 700.0,
    **extra,
) -> list[dict]:
    """Readings at `times_s` seconds after MIDNIGHT (negative: the day before)."""
    rows = []
    for t in times_s:
        p = power_w(t) if callable(power_w) else power_w
        rows.append(
            dict(
                sampled_at=at(t), host=host, gpu_index=0, gpu_uuid=uuid, gpu_model=MODEL,
                power_w=p, energy_mj_total=counter_mj(t) if counter_mj else None,
                power_limit_w=limit_w, source=source, **extra,
            )
        )
    return rows


def write(lake: Path, rows: list[dict], dataset: str = "gpu_samples") -> None:
    write_dataset(lake, dataset, pa.Table.from_pylist(rows))


@pytest.fixture()
def warehouse(tmp_path: Path, lake: Path):
    """build(day=DAY, settings=None) -> connection, on a DuckDB file beside the lake."""
    cons = []

    def build(day: dt.date = DAY, settings: WarehouseSettings | None = None, now: dt.datetime = NOW):
        if not cons:
            cons.append(connect(tmp_path / "warehouse.duckdb", lake))
        build_day(cons[0], day, settings or WarehouseSettings(), now=now)
        return cons[0]

    yield build
    for c in cons:
        c.close()


def hourly(con, uuid: str = "GPU-0", day: dt.date = DAY) -> dict[int, dict]:
    """fct_gpu_energy_hourly rows of one GPU keyed by hour of day (energy in J for hand checks)."""
    rows = con.execute(
        "SELECT hour(hour_at), energy_kwh * 3.6e6, coverage_ratio, energy_source, source, n_samples, n_sources "
        "FROM fct_gpu_energy_hourly WHERE gpu_uuid = ? AND day = ? ORDER BY hour_at",
        [uuid, day],
    ).fetchall()
    keys = ("energy_j", "coverage_ratio", "energy_source", "source", "n_samples", "n_sources")
    return {r[0]: dict(zip(keys, r[1:])) for r in rows}


def readings_as_table(con) -> None:
    """Turn the view stg_gpu_samples into a table of the same rows, so a test can plant a staging
    bug (duplicated or impossible rows) that the build itself would never write."""
    con.execute("CREATE TABLE stg_gpu_samples_planted AS SELECT * FROM stg_gpu_samples")
    con.execute("DROP VIEW stg_gpu_samples")
    con.execute("ALTER TABLE stg_gpu_samples_planted RENAME TO stg_gpu_samples")
