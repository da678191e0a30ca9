"""Run the daily DAG for one day through Airflow itself (`dag.test()`), in a child process.

Airflow reads its configuration when it is first imported, so the parent process sets
AIRFLOW_HOME (a SQLite metadata database under the output folder), the DAG folder and the
quiet defaults in the child's environment, then the child migrates the metadata database
(idempotent) and runs one DagRun. Nothing else runs the pipeline.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

DAG_ID = "joulehouse_daily"


class DagRunFailed(RuntimeError):
    """The DagRun ended in a state other than success; the message names the failed tasks."""


def default_dags_folder() -> Path:
    return Path(__file__).resolve().parents[1] / "dags"


def airflow_env(airflow_home: Path, dags_folder: Path) -> dict[str, str]:
    airflow_home.mkdir(parents=True, exist_ok=True)
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


def run_day(day: dt.date, config: Path, airflow_home: Path, dags_folder: Path | None = None) -> dict:
    """Run the DAG for `day` with the settings file `config`; return the child's summary.

    Raises DagRunFailed when the run does not succeed (the child's output says which task).
    """
    dags_folder = dags_folder or default_dags_folder()
    cmd = [sys.executable, "-m", "joulehouse_cli.dagrun", day.isoformat(), str(Path(config).resolve())]
    proc = subprocess.run(cmd, env=airflow_env(airflow_home, dags_folder), capture_output=True, text=True)
    result_line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("JOULEHOUSE_RESULT ")), None)
    if proc.returncode != 0 or result_line is None:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:])
        raise DagRunFailed(f"the {DAG_ID} run for {day} failed (exit {proc.returncode}):\n{tail}")
    result = json.loads(result_line.split(" ", 1)[1])
    if result["state"] != "success":
        raise DagRunFailed(f"the {DAG_ID} run for {day} ended {result['state']}; failed tasks: {result['failed_tasks']}\n"
                           + "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-40:]))
    return result


def _child(day: str, config: str) -> int:
    import logging

    logging.disable(logging.WARNING)
    from airflow.utils import db

    # `airflow db migrate`: creates the SQLite metadata database on first use, a no-op after.
    db.upgradedb()
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
    if bag.import_errors:
        print(f"DAG import errors: {bag.import_errors}", file=sys.stderr)
        return 2
    dag = bag.dags[DAG_ID]
    logical = dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc)
    run = dag.test(logical_date=logical, run_conf={"day": day, "config": config})
    tis = run.get_task_instances() if hasattr(run, "get_task_instances") else []
    failed = sorted(ti.task_id for ti in tis if str(ti.state) not in ("success", "TaskInstanceState.SUCCESS"))
    state = str(getattr(run.state, "value", run.state))
    print("JOULEHOUSE_RESULT " + json.dumps({"state": state, "failed_tasks": failed, "day": day}))
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2]))
