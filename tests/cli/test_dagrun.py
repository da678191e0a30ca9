"""`joulehouse run`'s wrapper around the Airflow child: what it refuses before starting one."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest

from joulehouse.cli.dagrun import DagRunFailed, DayBeingBuilt, one_run_at_a_time, run_day


def test_a_malformed_start_date_is_one_clear_error_before_airflow_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("JOULEHOUSE_START_DATE", "June 2026")
    with pytest.raises(DagRunFailed, match=r"JOULEHOUSE_START_DATE='June 2026' is not a date"):
        run_day(dt.date(2026, 6, 10), tmp_path / "joulehouse.toml", tmp_path / "airflow")
    assert not (tmp_path / "airflow" / "airflow.db").exists(), "no Airflow run was started"


HOLD_THE_HOME = """
import datetime as dt, sys, time
from pathlib import Path
from joulehouse.cli.dagrun import one_run_at_a_time
with one_run_at_a_time(Path(sys.argv[1]), dt.date.fromisoformat(sys.argv[2])):
    print("holding", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("held_day, message", [
    ("2026-06-10", "2026-06-10 is being built by another joulehouse run (pid {pid})"),
    ("2026-06-09", "another joulehouse run (pid {pid}) is building 2026-06-09"),
])
def test_a_second_run_while_one_holds_the_airflow_home_is_refused_before_starting(tmp_path, held_day, message):
    import subprocess
    import sys

    home = tmp_path / "airflow"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_THE_HOME, str(home), held_day], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(DayBeingBuilt) as refused:
            run_day(dt.date(2026, 6, 10), tmp_path / "joulehouse.toml", home)
        assert str(refused.value) == message.format(pid=holder.pid)
        assert not (home / "airflow.db").exists() and not (home / "logs").exists(), "nothing was started"
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
@pytest.mark.integration
def test_the_same_day_run_twice_at_once_the_second_says_so_in_one_line(tmp_path, shared_data):
    """The issue's reproduction: two `joulehouse run --date D` at once; the second used to end in a
    43-line SQLAlchemy IntegrityError traceback (the same DagRun inserted twice)."""
    import subprocess
    import sys

    from typer.testing import CliRunner

    from joulehouse.cli.main import app

    config, settings = _demo_config(tmp_path, shared_data, dt.date(2026, 6, 10), days=1)
    first = subprocess.Popen([sys.executable, "-m", "joulehouse", "run", "--date", "2026-06-10", "--config", str(config)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lock = tmp_path / "airflow" / "joulehouse-run.lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and f"pid={first.pid}" in lock.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    second = CliRunner().invoke(app, ["run", "--date", "2026-06-10", "--config", str(config)])
    out, _ = first.communicate(timeout=600)
    assert second.exit_code == 1
    assert second.output == f"error: 2026-06-10 is being built by another joulehouse run (pid {first.pid})\n"
    assert first.returncode == 0 and "joulehouse_daily 2026-06-10: success" in out, out
    # `run` ends with the report's path and the day's headline, as the warehouse holds it
    import duckdb

    with duckdb.connect(settings.warehouse.db_path, read_only=True) as con:
        kwh = con.execute("SELECT sum(energy_kwh) FROM fct_gpu_energy_hourly WHERE day = DATE '2026-06-10'").fetchone()[0]
    report = tmp_path / "reports" / "2026-06-10.html"
    unwrapped = "".join(out.split())  # rich wraps long lines at the pipe's 80 columns
    assert report.exists() and "".join(f"report: {report}".split()) in unwrapped
    assert f"{kwh:,.1f}kWh" in unwrapped and "GPUenergy(8GPUs,board)" in unwrapped


@pytest.mark.slow
@pytest.mark.integration
def test_one_session_runs_batches_of_days_and_stops_at_the_first_that_fails(tmp_path, shared_data):
    """The demo's DagSession: one Airflow child for every day, given in batches (the agent and the
    simulation work between them); a failing day is named as `run_day` names it, and the session
    then ends: the child is gone, the home is free, the log holds every day it ran."""
    from joulehouse.cli.dagrun import DagSession, one_run_at_a_time

    day, empty_day = dt.date(2026, 6, 10), dt.date(2026, 6, 12)
    config, settings = _demo_config(tmp_path, shared_data, day, days=1)
    home = tmp_path / "airflow"
    heard: list[tuple[dt.date, str | None]] = []
    with DagSession([day, empty_day], config, home) as session:
        first = session.run([day], on_day=lambda d, r: heard.append((d, r and r["state"])))
        assert first[0]["state"] == "success" and "render_report" in first[0]["ran"]
        assert heard == [(day, None), (day, "success")]
        assert (tmp_path / "reports" / f"{day}.html").exists()
        with duckdb.connect(settings.warehouse.db_path, read_only=True) as con:
            completed = con.execute("SELECT completed_at > built_at FROM fct_warehouse_build_daily WHERE day = ?",
                                    [day]).fetchall()
        assert completed == [(True,)], "the report step marks the day whole for readers"
        with pytest.raises(DagRunFailed) as failed:
            session.run([empty_day])
        assert session._proc.poll() is not None, "the child ended with the failed day"
    text = " ".join(str(failed.value).split())
    assert f"run for {empty_day} ended failed" in text
    assert f"task list_lake_hosts: NoReadingsForDay: no GPU readings for {empty_day}" in text
    log = home / "logs" / f"joulehouse-run-{day}..{empty_day}.log"
    assert f"full log: {log}" in text
    assert [line for line in log.read_text().splitlines() if line.startswith("JOULEHOUSE_DAY ")] == [
        f"JOULEHOUSE_DAY {day}", f"JOULEHOUSE_DAY {empty_day}"]
    with one_run_at_a_time(home, empty_day):
        pass  # the session let go of the Airflow home


RUN_AND_CHILD = """
import datetime as dt, sys, time
from pathlib import Path
from joulehouse.cli.dagrun import one_run_at_a_time
from joulehouse.cli.run_lock import spawn_holding_lock
child_code = "from joulehouse.cli.run_lock import stop_when_parent_dies; stop_when_parent_dies(1.5); " \\
             "import time; time.sleep(60)"
with one_run_at_a_time(Path(sys.argv[1]), dt.date.fromisoformat(sys.argv[2])) as lock:
    child = spawn_holding_lock([sys.executable, "-c", child_code], {}, lock, "pid=%d child={child} day=%s"
                               % (__import__("os").getpid(), sys.argv[2]))
    print(child.pid, flush=True)
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has let go of its files
    except FileNotFoundError:
        return False


def test_a_killed_run_leaves_no_build_behind_and_no_second_run_beside_it(tmp_path):
    """An operator's trial: `kill -9` of `joulehouse run` left its Airflow child building the day
    unseen (no log), and the lock went with the parent, so a second run of the day started beside
    it. The child holds the lock as well, and stops once its parent is gone."""
    import os
    import signal
    import subprocess
    import sys

    home, day = tmp_path / "airflow", dt.date(2026, 6, 13)
    run = subprocess.Popen([sys.executable, "-c", RUN_AND_CHILD, str(home), day.isoformat()], stdout=subprocess.PIPE,
                           text=True)
    child = int(run.stdout.readline())
    assert (home / "joulehouse-run.lock").read_text() == f"pid={run.pid} child={child} day={day}\n"
    os.kill(run.pid, signal.SIGKILL)
    run.wait()
    assert _alive(child)
    with pytest.raises(DayBeingBuilt, match=rf"\(pid {child}, the Airflow child of a run that was killed\)"):
        with one_run_at_a_time(home, day):
            pass
    deadline = time.monotonic() + 15
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the child outlived its run"
    with one_run_at_a_time(home, day):
        pass  # free again


def test_an_airflow_home_that_cannot_be_made_is_one_line(tmp_path):
    """An operator's trial: db_path under /proc gave three tracebacks (69 lines) from a mkdir."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    with pytest.raises(DagRunFailed, match=rf"cannot make the run's Airflow home {blocker / 'airflow'} .*: Not a directory"):
        run_day(dt.date(2026, 6, 10), tmp_path / "joulehouse.toml", blocker / "airflow")


@pytest.mark.slow
@pytest.mark.integration
def test_a_day_run_after_later_days_says_which_and_how_to_restate_them(tmp_path, shared_data):
    """The build warned of the later days through logging, which the Airflow child turns off: a
    rebuild of an earlier day printed success and nothing else. The warning now comes back with the
    day's result, and `joulehouse run` prints it."""
    from joulehouse.cli.dagrun import DagSession

    first, later = dt.date(2026, 6, 10), dt.date(2026, 6, 11)
    config, _ = _demo_config(tmp_path, shared_data, first, days=2)
    with DagSession([first, later], config, tmp_path / "airflow") as session:
        [built_first] = session.run([later])
        # built before the day the lake holds before it: that one is said too (joulehouse.daily_order)
        assert [w.split(":")[0] for w in built_first["warnings"]] == [
            "2026-06-11 was built before 1 earlier day(s) the lake holds readings for (2026-06-10 to 2026-06-10), "
            "which this warehouse has not built"]
        [rebuilt] = session.run([first])
    assert rebuilt["state"] == "success"
    assert rebuilt["warnings"] == [
        "2026-06-10 was built after 1 later day(s) (2026-06-11 to 2026-06-11): their power models, recommendations, "
        "exports, demand charges and first-day baselines did not see it; restate them in date order: "
        "joulehouse run --date 2026-06-11 --through 2026-06-11"]


def _demo_config(tmp_path: Path, shared_data, first: dt.date, *, days: int) -> tuple[Path, Any]:
    """The demo's settings written to a config file, over `days` simulated days of 8 GPUs from
    `first`, with a signing key: what `joulehouse run` needs; returns the file and the settings."""
    from joulehouse.cli.demo_run import demo_settings
    from joulehouse.collectors.config_contract import generate_keypair
    from joulehouse.collectors.settings import settings_to_toml
    from joulehouse.collectors.sim import simulate_fleet

    settings = demo_settings(tmp_path, shared_data)
    config = tmp_path / "joulehouse.toml"
    config.write_text(settings_to_toml(settings))
    simulate_fleet(Path(settings.lake.path), gpus=8, days=days, start=first, seed=3, interval_s=60.0)
    generate_keypair(tmp_path / "keys")
    return config, settings
