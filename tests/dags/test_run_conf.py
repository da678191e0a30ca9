"""A run triggered with a dag_run.conf no run can use fails at once, in one line naming the key.

Before, `{"day": "2026-13-45"}` failed the first task with "month must be in 1..12", `{"day":
20260610}` with "fromisoformat: argument must be str", a run triggered without a logical date
and without a day with `KeyError: 'data_interval_start'`; and each was retried (2 and 4 min of
backoff) though no retry mends it."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from joulehouse.daily_conf import RunConfError, run_config, run_day

REPO = Path(__file__).resolve().parents[2]
INTERVAL_START = dt.datetime(2026, 6, 10, 1, tzinfo=dt.timezone.utc)

# Runs each conf through dag.test(); "no_logical": triggered without a logical date (no data interval).
CHILD = """
import datetime as dt, json, os, sys
from airflow.utils import db
db.upgradedb()
from airflow.dag_processing.dagbag import DagBag
dag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"]).dags["joulehouse_daily"]
for i, conf in enumerate(json.loads(sys.argv[1])):
    no_logical = conf.pop("no_logical", False)
    logical = None if no_logical else dt.datetime(2026, 6, 10, 1, i, tzinfo=dt.timezone.utc)
    run = dag.test(logical_date=logical, run_conf=conf)
    print("STATE", run.state, flush=True)
"""


@pytest.mark.slow
def test_hostile_conf_values_fail_the_run_at_once_naming_the_key(tmp_path):
    from joulehouse.cli.dagrun import airflow_env

    env = airflow_env(tmp_path / "airflow", REPO / "dags")
    failures = tmp_path / "failures.jsonl"
    env.update(JOULEHOUSE_FAILURE_LOG=str(failures), JOULEHOUSE_START_DATE="2026-01-01",
               JOULEHOUSE_DAG_RETRIES="1")  # a retried task would wait out its 2 min retry_delay
    confs = [{"day": "2026-13-45"}, {"day": 20260610}, {"no_logical": True}]
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(confs)], env=env, capture_output=True, text=True,
                         timeout=110)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("STATE failed") == len(confs)
    said = [json.loads(line) for line in failures.read_text().splitlines()]
    assert [(s["task"], s["try"]) for s in said] == [("list_lake_hosts", "1")] * len(confs), said
    errors = [s["error"] for s in said]
    assert errors[0] == ("RunConfError: dag_run.conf['day']='2026-13-45': not a day of the calendar "
                         "(month must be in 1..12)")
    assert errors[1] == "RunConfError: dag_run.conf['day']=20260610: must be a day, 'YYYY-MM-DD' (UTC)"
    assert "triggered without a logical date" in errors[2] and "dag_run.conf['day'] = 'YYYY-MM-DD'" in errors[2]


@pytest.mark.parametrize("day", ["20260610", "2026-W24-3", " 2026-06-10", "2026-06-10T00:00", ["2026-06-10"]])
def test_a_day_in_another_spelling_is_refused_not_passed_on_unnormalised(day):
    with pytest.raises(RunConfError, match=r"dag_run.conf\['day'\]=.*must be a day, 'YYYY-MM-DD' \(UTC\)"):
        run_day({"day": day}, INTERVAL_START)


def test_the_day_is_the_confs_else_the_data_intervals():
    assert run_day({"day": "2026-02-28"}, INTERVAL_START) == "2026-02-28"
    assert run_day({}, INTERVAL_START) == "2026-06-10"
    with pytest.raises(RunConfError, match="not a day of the calendar"):
        run_day({"day": "2026-02-30"}, INTERVAL_START)


def test_the_config_is_the_confs_else_joulehouse_config():
    assert run_config({"config": "/etc/jh/site.toml"}, {"JOULEHOUSE_CONFIG": "/etc/jh/a.toml"}) == "/etc/jh/site.toml"
    assert run_config({}, {"JOULEHOUSE_CONFIG": "/etc/jh/a.toml"}) == "/etc/jh/a.toml"
    assert run_config({}, {"JOULEHOUSE_CONFIG": "  "}) is None  # blank names no file, as for the CLI
    with pytest.raises(RunConfError, match=r"dag_run.conf\['config'\]=\['a'\]: must be the path of a settings file"):
        run_config({"config": ["a"]}, {})


def test_a_triggered_run_takes_settings_only_from_the_folders_the_deployment_allows(tmp_path):
    """The settings choose the warehouse file, the export folder, the signing key and where the
    signed config is published: whoever could trigger a run could point them at any TOML file the
    worker reads (another fleet's settings, a file they dropped in /tmp)."""
    site, elsewhere = tmp_path / "etc", tmp_path / "tmp"
    site.mkdir(), elsewhere.mkdir()
    (elsewhere / "evil.toml").write_text("", encoding="utf-8")
    (site / "link.toml").symlink_to(elsewhere / "evil.toml")
    deployed = {"JOULEHOUSE_CONFIG": str(site / "a.toml")}
    assert run_config({"config": str(site / "b.toml")}, deployed) == str(site / "b.toml")
    for outside in (elsewhere / "evil.toml", site / "link.toml", site / ".." / "tmp" / "evil.toml"):
        with pytest.raises(RunConfError, match=r"not in a folder this deployment takes settings files from .*"
                                               r"JOULEHOUSE_CONFIG_DIRS"):
            run_config({"config": str(outside)}, deployed)
    with pytest.raises(RunConfError, match=r"from \(none\)"):
        run_config({"config": str(site / "b.toml")}, {})
    listed = {"JOULEHOUSE_CONFIG_DIRS": f"{site}{os.pathsep}{elsewhere}"}
    assert run_config({"config": str(elsewhere / "evil.toml")}, listed) == str(elsewhere / "evil.toml")
