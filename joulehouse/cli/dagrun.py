"""Run the daily DAG for one day (or several, one after the other) through Airflow itself
(`dag.test()`), in a child process.

Airflow reads its configuration when it is first imported, so the parent process sets
AIRFLOW_HOME (a SQLite metadata database under the output folder), the DAG folder and the
quiet defaults in the child's environment, then the child migrates the metadata database
(idempotent) and runs one DagRun per day. Nothing else runs the pipeline.

One run at a time per Airflow home: a second `joulehouse run` (the same day, or another) while one
is going would create the same DagRun in the metadata database (a SQLAlchemy IntegrityError) and a
second writer of the warehouse; it is refused in one line naming the run in progress
(DayBeingBuilt), from an flock the kernel drops when the first run and its Airflow child end,
however they end; the child stops when the run is gone (joulehouse/cli/run_lock.py).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import queue
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO
from pathlib import Path

from joulehouse.cli.run_lock import (  # noqa: F401  (DagRunFailed, DayBeingBuilt: importable from here)
    DagRunFailed, DayBeingBuilt, one_run_at_a_time, spawn_holding_lock, stop_when_parent_dies)
from joulehouse.daily_conf import CONFIG_FOLDERS_ENV

DAG_ID = "joulehouse_daily"


def default_dags_folder() -> Path:
    """The DAG files installed with the package (the repository's dags/, as joulehouse.dags)."""
    from importlib import resources

    return Path(str(resources.files("joulehouse.dags")))


AIRFLOW_CFG = """# Written by joulehouse: the same home the runs used, so `AIRFLOW_HOME={home} airflow standalone`
# (with the virtualenv's bin/ on PATH: standalone starts its parts as `airflow`) opens them in the
# Airflow UI (http://localhost:8080; the login is in simple_auth_manager_passwords.json.generated).
[core]
dags_folder = {dags}
load_examples = False
[database]
sql_alchemy_conn = sqlite:///{home}/airflow.db
"""


def airflow_env(airflow_home: Path, dags_folder: Path) -> dict[str, str]:
    airflow_home.mkdir(parents=True, exist_ok=True)
    cfg = airflow_home / "airflow.cfg"
    if not cfg.exists():
        cfg.write_text(AIRFLOW_CFG.format(home=airflow_home.resolve(), dags=dags_folder))
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home / 'airflow.db'}",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
            "AIRFLOW__CORE__DAGBAG_IMPORT_ERROR_TRACEBACKS": "True",
            "PYTHONWARNINGS": "ignore",
            "JOULEHOUSE_DAG_RETRIES": "0",
        }
    )
    return env


# on_task(task_id, tasks finished, tasks in the run): called when the running task changes.
TaskWatcher = Callable[[str, int, int], None]

RUNNING_TASK_SQL = """
SELECT (SELECT task_id || CASE WHEN map_index >= 0 THEN '[' || map_index || ']' ELSE '' END
        FROM task_instance WHERE run_id = r.run_id AND state = 'running' ORDER BY start_date DESC LIMIT 1),
       (SELECT count(*) FROM task_instance WHERE run_id = r.run_id AND state IN ('success', 'failed', 'skipped')),
       (SELECT count(*) FROM task_instance WHERE run_id = r.run_id)
FROM (SELECT run_id FROM dag_run WHERE dag_id = ? ORDER BY id DESC LIMIT 1) AS r
"""


def watch_tasks(db: Path, on_task: TaskWatcher, stop: threading.Event, every_s: float = 0.3) -> None:
    """Tell `on_task` which task of the newest run is running, from Airflow's own metadata
    database (read-only; a moment the writer holds it is simply skipped)."""
    last = None
    while not stop.wait(every_s):
        if not db.exists():
            continue
        try:
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=0.2) as con:
                row = con.execute(RUNNING_TASK_SQL, [DAG_ID]).fetchone()
        except sqlite3.Error:
            continue
        if row and row[0] and row != last:
            last = row
            on_task(row[0], row[1], row[2])


def run_day(day: dt.date, config: Path, airflow_home: Path, dags_folder: Path | None = None,
            on_task: TaskWatcher | None = None) -> dict:
    """Run the DAG for `day` with the settings file `config`; return the child's summary.
    `on_task` hears which task is running (for a progress line).

    The child's whole output goes to AIRFLOW_HOME/logs/joulehouse-run-<day>.log. Raises
    DagRunFailed when the run does not succeed: the message names each failed task with its error
    (from the DAG's failure callback), the tasks that did not run because of it, and the log;
    DayBeingBuilt (before starting anything) when another run holds `airflow_home`.
    """
    return run_days([day], config, airflow_home, dags_folder, on_task)[0]


# on_day(day, summary): a day of run_days starts (summary None) or has succeeded (its summary).
DayWatcher = Callable[[dt.date, "dict | None"], None]
DAY_LINE, RESULT_LINE, BATCH_DONE = "JOULEHOUSE_DAY ", "JOULEHOUSE_RESULT ", "JOULEHOUSE_BATCH_DONE"


def run_days(days: Sequence[dt.date], config: Path, airflow_home: Path, dags_folder: Path | None = None,
             on_task: TaskWatcher | None = None, on_day: DayWatcher | None = None) -> list[dict]:
    """Run the DAG for each of `days`, in order, in one child process; return their summaries.
    The first day that fails stops them: its DagRunFailed names it as `run_day`'s does."""
    days = list(days)
    if not days:
        return []
    with DagSession(days, config, airflow_home, dags_folder) as session:
        return session.run(days, on_task=on_task, on_day=on_day)


class DagSession:
    """One Airflow child that runs the DAG for batches of days, as the caller asks, until closed.

    One child for several days pays Airflow's start (its import, the metadata database's migration,
    the DAG's parse, the execution API's first request) and the tasks' imports (Great Expectations,
    scipy, plotly) once instead of once per day: ~8 s a day on 2 cores. Each day is still its own
    DagRun through dag.test(). `days` are all the days the session may run (the run lock names
    them, JOULEHOUSE_START_DATE goes back to the first); the log is
    logs/joulehouse-run-<day>.log (<first>..<last> for several days), written as the child writes.
    """

    def __init__(self, days: Sequence[dt.date], config: Path, airflow_home: Path, dags_folder: Path | None = None,
                 *, held_lock: IO[str] | None = None):
        """`held_lock`: the run lock of `airflow_home` (one_run_at_a_time) when the caller took it
        before its own work; else the session takes it."""
        self.days, self.config, self.home = sorted(days), Path(config), Path(airflow_home)
        self._held_lock = held_lock
        self.dags_folder = dags_folder or default_dags_folder()
        name = str(self.days[0]) if len(self.days) == 1 else f"{self.days[0]}..{self.days[-1]}"
        logs = self.home / "logs"
        self.failures, self.run_log = logs / f"joulehouse-failures-{name}.jsonl", logs / f"joulehouse-run-{name}.log"
        self._on_task: TaskWatcher | None = None
        self._output: list[str] = []

    def __enter__(self) -> DagSession:
        self._stack = contextlib.ExitStack()
        try:
            self._lock = self._held_lock or self._stack.enter_context(one_run_at_a_time(self.home, self.days))
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        env = airflow_env(self.home, self.dags_folder)
        self.run_log.parent.mkdir(parents=True, exist_ok=True)
        self.failures.unlink(missing_ok=True)
        env["JOULEHOUSE_FAILURE_LOG"] = str(self.failures)
        # The settings file this run was given is the one its DAG runs may take (joulehouse.daily_conf)
        env[CONFIG_FOLDERS_ENV] = str(self.config.resolve().parent)
        # The DAG starts on JOULEHOUSE_START_DATE and Airflow runs no task for a day before its start:
        # a one-off run of an earlier day (a backfill of old logs) moves it back to that day.
        first = self.days[0]
        try:
            start = dt.date.fromisoformat(env["JOULEHOUSE_START_DATE"][:10]) if env.get("JOULEHOUSE_START_DATE") else first
        except ValueError:
            raise DagRunFailed(f"JOULEHOUSE_START_DATE={env['JOULEHOUSE_START_DATE']!r} is not a date (YYYY-MM-DD)") from None
        env["JOULEHOUSE_START_DATE"] = min(start, first).isoformat()
        log = self._stack.enter_context(open(self.run_log, "w", encoding="utf-8"))
        # -P: the child imports this installed joulehouse, never a checkout that happens to be the cwd.
        # It reads batches of days from stdin; one pipe for its stdout and stderr, read by a thread
        # (into the log and a queue) so that the child never blocks on a full pipe between batches.
        # The child holds the run lock too (the same flock, through the descriptor it inherits)
        # and stops when this process is gone (joulehouse/cli/run_lock.py): a `kill -9` of
        # `joulehouse run` never leaves a build running unseen beside the next run.
        self._proc = spawn_holding_lock(
            [sys.executable, "-P", "-m", "joulehouse.cli.dagrun", str(self.config.resolve())], env, self._lock,
            f"pid={os.getpid()} child={{child}} day={','.join(d.isoformat() for d in self.days)}",
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self._stack.callback(self._stop_child)
        self._lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            for line in self._proc.stdout:
                log.write(line)
                log.flush()
                self._lines.put(line)
            self._lines.put(None)

        self._pump = threading.Thread(target=pump, daemon=True)
        self._pump.start()
        stop = threading.Event()
        watcher = threading.Thread(target=watch_tasks, args=(self.home / "airflow.db", self._heard_task, stop), daemon=True)
        watcher.start()
        self._stack.callback(watcher.join)
        self._stack.callback(stop.set)

    def _heard_task(self, task: str, done: int, total: int) -> None:
        if self._on_task:
            self._on_task(task, done, total)

    def _stop_child(self) -> None:
        if self._proc.stdin and not self._proc.stdin.closed:
            self._proc.stdin.close()  # end of batches: the child exits
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._pump.join()

    def __exit__(self, *exc) -> None:
        self._stack.close()

    def run(self, days: Sequence[dt.date], on_task: TaskWatcher | None = None,
            on_day: DayWatcher | None = None) -> list[dict]:
        """Run the DAG for each of `days` in order; return their summaries, or raise DagRunFailed
        for the first that fails (the later ones are not run)."""
        days = list(days)
        if not days:
            return []
        self._on_task, results = on_task, {}
        try:
            self._proc.stdin.write(",".join(d.isoformat() for d in days) + "\n")
            self._proc.stdin.flush()
        except BrokenPipeError:
            pass  # the child is gone: its output says why, below
        while (line := self._lines.get()) is not None and not line.startswith(BATCH_DONE):
            self._output.append(line)
            if line.startswith(DAY_LINE) and on_day:
                on_day(dt.date.fromisoformat(line.split(" ", 1)[1].strip()), None)
            elif line.startswith(RESULT_LINE):
                result = json.loads(line.split(" ", 1)[1])
                results[dt.date.fromisoformat(result["day"])] = result
                if on_day and result["state"] == "success" and result.get("ran"):
                    on_day(dt.date.fromisoformat(result["day"]), result)
        self._on_task = None
        if line is None:
            self._lines.put(None)  # a later run() hears the end too
        if any(results.get(day, {}).get("state") != "success" for day in days):
            # The session ends with a failed day; once the child is gone, every failure callback
            # has written its line (as when one child ran one day).
            self._stop_child()
        for day in days:
            self._check(day, results.get(day), exited=line is None)
        return [results[day] for day in days]

    def _check(self, day: dt.date, result: dict | None, exited: bool) -> None:
        if result is not None and result["state"] == "success":
            if not result.get("ran"):
                raise DagRunFailed(f"the {DAG_ID} run for {day} ran no task (is {day} before the DAG's start_date, "
                                   f"JOULEHOUSE_START_DATE?)\nfull log: {self.run_log}")
            return
        reasons = [json.loads(line) for line in self.failures.read_text().splitlines()] if self.failures.exists() else []
        reasons = [r for r in reasons if r.get("day") in (None, "None", str(day))]
        lines = [f"task {r['task']}: {r['error'] or 'failed (no exception; see the log)'}" for r in reasons]
        if result is not None and result.get("not_run"):
            lines.append(f"not run because of it: {', '.join(result['not_run'])}")
        if not reasons:  # the run failed outside any task (import error, metadata database): show the end
            lines.append("\n".join("".join(self._output).strip().splitlines()[-20:]))
        if result is not None:
            state = result["state"]
        else:
            state = f"failed (exit {self._proc.wait()})" if exited else "failed"
        raise DagRunFailed(f"the {DAG_ID} run for {day} ended {state}\n" + "\n".join(lines) + f"\nfull log: {self.run_log}")


def _metadata_commits_without_fsync() -> None:
    """SQLite's WAL (Airflow's journal mode) synced to disk at every commit: ~190 fdatasyncs per
    day, 7 ms each here, for a metadata database of one-off runs. synchronous=NORMAL syncs at
    checkpoints only: a crash may lose the last commits, never the database (SQLite's own terms)."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _normal_sync(dbapi_connection, _record) -> None:
        if isinstance(dbapi_connection, sqlite3.Connection):
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()


def _child(config: str, days: list[str]) -> int:
    """Run `days`, or (with none given) each batch of days read from stdin (one line each, days
    separated by commas; BATCH_DONE after each) until stdin ends."""
    import logging

    logging.disable(logging.WARNING)
    stop_when_parent_dies()
    _metadata_commits_without_fsync()  # before Airflow opens its first connection
    from airflow.utils import db

    # `airflow db migrate`: creates the SQLite metadata database on first use, a no-op after.
    db.upgradedb()
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    if bag.import_errors:
        print(f"DAG import errors: {bag.import_errors}", file=sys.stderr)
        return 2
    dag = bag.dags[DAG_ID]
    if not days:
        # While the parent prepares the days (the demo simulates its first ones), import what the
        # tasks will: on another core that costs the run nothing (3.5 s of imports, GX the most).
        from joulehouse.daily import import_task_modules

        import_task_modules()
    batches = [days] if days else (line.strip().split(",") for line in sys.stdin if line.strip())
    for batch in batches:
        for day in batch:
            print(DAY_LINE + day, flush=True)
            if _run_one(dag, day, config)["state"] != "success":
                break  # a later day may need this one's rows (the models read earlier days)
        print(BATCH_DONE, flush=True)
    return 0


def _run_one(dag, day: str, config: str) -> dict:
    logical = dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc)
    run = dag.test(logical_date=logical, run_conf={"day": day, "config": config})
    tis = run.get_task_instances() if hasattr(run, "get_task_instances") else []
    # a mapped task has one instance per host: keyed by task and map index, one failure is not hidden
    states = {ti.task_id if (ti.map_index is None or ti.map_index < 0) else f"{ti.task_id}[{ti.map_index}]":
              str(getattr(ti.state, "value", ti.state)) for ti in tis}
    failed = sorted(t for t, s in states.items() if s == "failed")
    not_run = sorted(t for t, s in states.items() if s not in ("failed", "success"))
    state = str(getattr(run.state, "value", run.state))
    ran = sorted(t for t, s in states.items() if s in ("success", "failed"))
    result = {"state": state, "failed_tasks": failed, "not_run": not_run, "ran": ran, "day": day,
              "warnings": _warnings(run, day)}
    print(RESULT_LINE + json.dumps(result), flush=True)
    return result


def _warnings(run, day: str) -> list[str]:
    """The day's warnings (joulehouse.daily_order.day_warnings) from the tasks' returned summaries: this
    child's logging is off (Airflow's own warnings would fill the run's log)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from joulehouse.daily_order import day_warnings

    try:
        with create_session() as session:
            rows = session.scalars(XComModel.get_many(run_id=run.run_id, dag_ids=DAG_ID, key="return_value",
                                                      task_ids=["build_warehouse", "check_data"])).all()
            summaries = {row.task_id: XComModel.deserialize_value(row) for row in rows}
    except Exception as exc:  # the day ran: a summary that cannot be read is said, not a failed run
        return [f"the day's task summaries could not be read for its warnings ({type(exc).__name__}: {exc})"]
    return day_warnings(day, {t: v for t, v in summaries.items() if isinstance(v, dict)})


if __name__ == "__main__":
    import atexit

    code = _child(sys.argv[1], sys.argv[2:])
    # Exit without the interpreter's teardown of Airflow's, GX's and DuckDB's modules (2 s at the
    # end of every run): the exit handlers still run, and every write is committed or closed.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
