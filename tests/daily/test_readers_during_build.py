"""Readers never block the build, and the build never breaks a reader (issue 20): analysts hold
the warehouse open read-only in other processes and query it while the daily code rebuilds a day;
the run succeeds and every answer is the old day or the new one, never an error or a mix."""

from __future__ import annotations

import datetime as dt
import json
import runpy
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from joulehouse import daily
from joulehouse.collectors.writer import write_dataset
from joulehouse.settings import LakeSettings, Settings, WarehouseSettings, settings_to_toml

DAY = dt.date(2026, 4, 1)
START = dt.datetime(2026, 4, 1, tzinfo=dt.timezone.utc)
READER = Path(__file__).with_name("warehouse_reader.py")


def _gpu_day(lake: Path, host: str, gpus: int, power_w: float) -> None:
    n = 24 * 360  # every 10 s
    rows = {"sampled_at": [], "host": [], "gpu_index": [], "gpu_uuid": [], "gpu_model": [], "power_w": [], "source": []}
    for g in range(gpus):
        rows["sampled_at"] += [START + dt.timedelta(seconds=10 * i) for i in range(n)]
        rows["host"] += [host] * n
        rows["gpu_index"] += [g] * n
        rows["gpu_uuid"] += [f"GPU-{host}-{g}"] * n
        rows["gpu_model"] += ["NVIDIA H100 80GB HBM3"] * n
        rows["power_w"] += [power_w + 10 * g + (i % 60) for i in range(n)]
        rows["source"] += ["nvml"] * n
    write_dataset(lake, "gpu_samples", pa.Table.from_pydict(rows))


def _build(day: str, config: str) -> None:
    daily.build_warehouse(day, config)
    daily.check_data(day, config)


def _answers(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def _wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "reader gave no answer in time"
        time.sleep(0.05)


@pytest.mark.integration
def test_analysts_querying_every_moment_see_the_old_day_or_the_new_one(tmp_path):
    lake, db = tmp_path / "lake", tmp_path / "warehouse.duckdb"
    config = tmp_path / "joulehouse.toml"
    config.write_text(settings_to_toml(Settings(lake=LakeSettings(path=str(lake)), warehouse=WarehouseSettings(
        db_path=str(db), compact_lake=False))))
    _gpu_day(lake, "node-01", 4, 200.0)
    _build(DAY.isoformat(), str(config))
    old = _answers_of_one_query(db)
    _gpu_day(lake, "node-02", 2, 300.0)  # a late ship: the rebuilt day has two more GPUs

    stop = tmp_path / "stop"
    readers = {}
    for mode in ("hold", "reconnect"):
        out = tmp_path / f"{mode}.jsonl"
        readers[mode] = (out, subprocess.Popen([sys.executable, str(READER), str(db), DAY.isoformat(), str(stop),
                                                "0.02", mode], stdout=out.open("w"), stderr=subprocess.STDOUT))
    try:
        for out, _ in readers.values():
            _wait_for(lambda out=out: out.exists() and _answers(out))
        started = time.time()
        _build(DAY.isoformat(), str(config))  # fails on DuckDB's lock if a reader's open file blocked it
        built = time.time()
        new = _answers_of_one_query(db)
        out = readers["reconnect"][0]
        _wait_for(lambda: any(a.get("answer") == new and a["at"] > built for a in _answers(out)))
    finally:
        stop.touch()
        for _, process in readers.values():
            process.wait(timeout=30)

    assert old != new and new[1] == old[1] + 2
    for mode, (out, process) in readers.items():
        answers = _answers(out)
        assert process.returncode == 0, out.read_text()[-2000:]
        assert [a for a in answers if "error" in a] == [], f"{mode} reader got errors"
        during = [a for a in answers if started <= a["at"] <= built]
        assert len(during) >= 5, f"{mode} reader asked only {len(during)} times during the rebuild"
        assert {tuple(a["answer"]) for a in answers} <= {tuple(old), tuple(new)}, f"{mode} saw a half-built day"
    # A connection held open keeps reading the file it opened; a new one reads the rebuilt day.
    assert {tuple(a["answer"]) for a in _answers(readers["hold"][0])} == {tuple(old)}


def _answers_of_one_query(db: Path) -> list:
    """The reader's question, asked once from here on a connection closed right after."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return list(con.execute(runpy.run_path(str(READER))["QUERY"], {"day": DAY.isoformat()}).fetchone())
    finally:
        con.close()
