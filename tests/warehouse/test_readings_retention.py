"""warehouse.readings_retention_days: the warehouse keeps the clean readings of the last days
only, and nothing a user reads of the older days changes.

What a user relies on: the file stops growing with history while every day's energy, checks and
the power fit's stored sums stay; a backfill of an old day gets its readings back; a setting
that would delete what the models re-read is refused when the settings load.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os

import pytest

from joulehouse.settings import (OUTCOME_READING_DAYS, ModelSettings, Settings, SettingsError, WarehouseSettings,
                                 load_settings)
from joulehouse.collectors.sim import simulate_fleet
from joulehouse.models.limit_change import LOOKBACK_DAYS, MAX_AFTER_DAYS
from joulehouse.models.power import update_suffstats
from joulehouse.warehouse.build import build_day
from joulehouse.warehouse.db import connect

FIRST = dt.date(2026, 3, 1)
NOW = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    root = tmp_path_factory.mktemp("retention")
    summary = simulate_fleet(root / "lake", gpus=2, days=5, start=FIRST, seed=5, interval_s=60)
    return root, summary


def _build_all(root, summary, name: str, keep: int, days: int = 5):
    con = connect(root / f"{name}.duckdb", root / "lake")
    ws = WarehouseSettings(inventory_path=str(summary.inventory_path), readings_retention_days=keep)
    builds = [build_day(con, FIRST + dt.timedelta(days=i), ws, now=NOW) for i in range(days)]
    return con, ws, builds


def _by_day(con, sql: str) -> dict:
    return {d: v for d, v in con.execute(sql).fetchall()}


@pytest.mark.slow
def test_readings_older_than_the_retention_leave_the_file_and_every_day_keeps_its_energy(fleet):
    root, summary = fleet
    kept, _, _ = _build_all(root, summary, "keep-all", keep=0)
    con, ws, builds = _build_all(root, summary, "keep-2", keep=2)
    days = [FIRST + dt.timedelta(days=i) for i in range(5)]
    readings = _by_day(kept, "SELECT day, count(*) FROM stg_gpu_samples GROUP BY day")
    assert sorted(readings) == days

    assert _by_day(con, "SELECT day, count(*) FROM stg_gpu_samples GROUP BY day") == {d: readings[d] for d in days[3:]}
    # each build deletes the day that fell out of the newest two; the last one, day 3 of 5
    assert (builds[-1].pruned_through, builds[-1].pruned_gpu_rows) == (days[2], readings[days[2]])
    assert sum(b.pruned_gpu_rows for b in builds) == sum(readings[d] for d in days[:3])
    energy = "SELECT hour_at, gpu_uuid, energy_kwh, coverage_ratio FROM fct_gpu_energy_hourly ORDER BY ALL"
    assert con.execute(energy).fetchall() == kept.execute(energy).fetchall()
    assert len(con.execute(energy).fetchall()) == 5 * 24 * 2
    pruned = _by_day(con, "SELECT day, readings_pruned_at IS NOT NULL FROM fct_warehouse_build_daily")
    assert pruned == {d: d <= days[2] for d in days}
    counts = "SELECT day, n_clean_gpu_samples FROM fct_warehouse_build_daily"
    assert _by_day(con, counts) == _by_day(kept, counts)  # what each build kept stays on record

    # A backfill of day 0 reads its readings from the lake again and keeps them for its own run.
    again = build_day(con, days[0], ws, now=NOW)
    assert again.pruned_gpu_rows == 0
    assert _by_day(con, "SELECT day, count(*) FROM stg_gpu_samples GROUP BY day") == {
        d: readings[d] for d in (days[0], days[3], days[4])}
    assert con.execute(energy).fetchall() == kept.execute(energy).fetchall()
    assert not _by_day(con, "SELECT day, readings_pruned_at IS NOT NULL FROM fct_warehouse_build_daily")[days[0]]
    con.close()
    kept.close()


@pytest.mark.slow
def test_the_readings_stop_growing_with_history(tmp_path):
    """The readings are Parquet files beside the warehouse file (warehouse/readings.py): keeping one
    day, the files of the days let go are deleted by the next build, so the bytes on disk stop
    growing; keeping every day, they grow with the days built."""
    summary = simulate_fleet(tmp_path / "lake", gpus=4, days=5, start=FIRST, seed=6, interval_s=5)
    sizes = {}
    for keep in (0, 1):
        con = connect(tmp_path / f"size-{keep}.duckdb", tmp_path / "lake")
        ws = WarehouseSettings(inventory_path=str(summary.inventory_path), readings_retention_days=keep,
                               readings_superseded_keep_s=0)
        folder = tmp_path / f"size-{keep}" / "readings" / "stg_gpu_samples"
        sizes[keep] = []
        for i in range(5):
            build_day(con, FIRST + dt.timedelta(days=i), ws, now=NOW)
            sizes[keep].append(sum(p.stat().st_size for p in folder.rglob("*.parquet")))
        assert sorted(p.name for p in folder.iterdir())[-1] == f"day={FIRST + dt.timedelta(days=4)}"
        con.close()
    assert sizes[0][-1] > 3.5 * sizes[0][0]
    # at most the day kept and the one let go at this build (deleted by the next)
    assert sizes[1][-1] <= 1.1 * max(sizes[1][1:4])
    assert sizes[1][-1] < 0.5 * sizes[0][-1]


@pytest.mark.slow
def test_the_fit_keeps_the_stored_sums_of_days_whose_readings_were_deleted(fleet):
    """Sums are stored while a day's readings exist; once retention deletes them, a fit whose
    window still covers that day (a backfill's) keeps its stored sums instead of summing nothing."""
    root, summary = fleet
    con = connect(root / "fit.duckdb", root / "lake")
    ws = WarehouseSettings(inventory_path=str(summary.inventory_path), readings_retention_days=2)
    window = ModelSettings(history_days=3)
    days = [FIRST + dt.timedelta(days=i) for i in range(3)]
    for d in days[:2]:
        build_day(con, d, ws, now=NOW)
        update_suffstats(con, d, window)
    stored = "SELECT sum(n_rows), sum(sy) FROM fct_power_fit_sums_hourly WHERE day = ?"
    before = con.execute(stored, [days[0]]).fetchone()
    assert before[0] > 0
    build_day(con, days[2], ws, now=NOW)  # deletes day 0's readings
    assert con.execute("SELECT count(*) FROM stg_gpu_samples WHERE day = ?", [days[0]]).fetchone()[0] == 0
    assert update_suffstats(con, days[2], window) == [days[2]]
    assert con.execute(stored, [days[0]]).fetchone() == before
    con.close()


def test_a_retention_shorter_than_what_the_models_re_read_is_refused_at_load(tmp_path):
    def load(text: str, env: dict | None = None) -> Settings:
        path = tmp_path / "joulehouse.toml"
        path.write_text(text)
        return load_settings(path, env=env or {})

    assert OUTCOME_READING_DAYS == LOOKBACK_DAYS + MAX_AFTER_DAYS + 1
    assert Settings().warehouse.readings_retention_days >= ModelSettings().history_days
    with pytest.raises(SettingsError, match=r"readings_retention_days = 10: .* at least 28"):
        load("[warehouse]\nreadings_retention_days = 10\n")
    with pytest.raises(SettingsError, match="at least 40"):
        load("[warehouse]\nreadings_retention_days = 35\n[models]\nhistory_days = 40\n")
    with pytest.raises(SettingsError, match=r"\[warehouse\].readings_retention_days = -1 .*greater than or equal to 0"):
        load("[warehouse]\nreadings_retention_days = -1\n")
    with pytest.raises(ValueError, match="readings_retention_days"):
        Settings(warehouse=dataclasses.replace(WarehouseSettings(), readings_retention_days=10))
    assert load("[warehouse]\nreadings_retention_days = 0\n").warehouse.readings_retention_days == 0
    assert load("", env={"JOULEHOUSE_WAREHOUSE__READINGS_RETENTION_DAYS": "60"}).warehouse.readings_retention_days == 60


def test_a_saved_query_over_a_pruned_day_says_why_it_has_no_rows(fleet):
    """`sql --saved idle-energy-share --param day=D` answered a bare header, exit 0, for a day
    whose readings were past retention: a user read "no idle energy"."""
    import typer
    from typer.testing import CliRunner

    from joulehouse.cli.sql import register

    root, summary = fleet
    con, _, _ = _build_all(root, summary, "keep-1-sql", keep=1, days=4)
    con.close()
    app = typer.Typer()
    register(app)
    app.command("noop")(lambda: None)  # a second command keeps `sql` addressable by name
    db = str(root / "keep-1-sql.duckdb")

    def saved(day: dt.date):
        return CliRunner().invoke(app, ["sql", "--saved", "idle-energy-share", "--param", f"day={day}", "--db", db,
                                        "--format", "csv"])

    pruned = saved(FIRST)
    assert pruned.exit_code == 0 and pruned.stdout.count("\n") == 1  # the header: the readings are gone
    assert "note: no rows: the readings of 2026-03-01 (stg_gpu_samples) are past retention" in pruned.stderr
    never = saved(FIRST - dt.timedelta(days=30))
    assert "note: no rows: 2026-01-30 is not built in this warehouse" in never.stderr
    kept = saved(FIRST + dt.timedelta(days=3))
    assert kept.stdout.count("\n") > 1 and kept.stderr == ""
