"""The DAG file parses without errors, imports nothing heavy, and is wired as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DAG_FILE = REPO / "dags" / "joulehouse_daily.py"
HEAVY = ["duckdb", "polars", "pandas", "plotly", "pyarrow", "numpy", "scipy", "great_expectations",
         "joulehouse.warehouse", "joulehouse.models", "joulehouse.reports", "joulehouse.collectors"]


def _airflow_env(tmp_path: Path) -> dict[str, str]:
    from joulehouse.cli.dagrun import airflow_env

    return airflow_env(tmp_path / "airflow", REPO / "dags")


@pytest.mark.slow
@pytest.mark.parametrize("dag_file", [DAG_FILE, REPO / "dags" / "joulehouse_publish.py"], ids=lambda p: p.name)
def test_parsing_the_dag_file_imports_nothing_heavy(tmp_path, dag_file):
    """The scheduler's dag-processor parses every DAG file every 30 s; the publish DAG's was never probed."""
    probe = (
        "import sys, runpy; before = set(sys.modules); runpy.run_path(%r); "
        "print(sorted(set(sys.modules) - before))" % str(dag_file)
    )
    out = subprocess.run([sys.executable, "-c", probe], env=_airflow_env(tmp_path), capture_output=True, text=True, check=True)
    imported = eval(out.stdout.strip().splitlines()[-1])  # a printed list of module names
    heavy = {m for m in imported if any(m == h or m.startswith(h + ".") for h in HEAVY)}
    assert not heavy, f"parse-time imports: {sorted(heavy)}"


@pytest.mark.slow
def test_dagbag_loads_without_errors_and_tasks_are_wired(tmp_path):
    probe = f"""
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder={str(REPO / 'dags')!r})
dag = bag.dags['joulehouse_daily']
publish = bag.dags['joulehouse_publish']
from airflow.serialization.encoders import coerce_to_core_timetable
from airflow.timetables.base import TimeRestriction
timetable = coerce_to_core_timetable(dag.timetable)  # what the scheduler runs
restriction = TimeRestriction(earliest=dag.start_date, latest=None, catchup=True)
first = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction)
second = timetable.next_dagrun_info(last_automated_data_interval=first.data_interval, restriction=restriction)
print(json.dumps({{
  'dags': sorted(bag.dags),
  'catchup': dag.catchup, 'max_active_runs': dag.max_active_runs,
  'mapped': sorted(t.task_id for t in dag.tasks if 'MappedOperator' in type(t).__name__),
  'outlets': {{t.task_id: [a.name for a in t.outlets] for t in dag.tasks if t.outlets}},
  'callbacks': sorted({{t.task_id for t in dag.tasks if t.on_failure_callback}}),
  'publish_callbacks': all(t.on_failure_callback for t in publish.tasks),
  'publish_schedule': str(publish.schedule),
  'runs': [(str(i.run_after), str(i.data_interval.start), str(i.data_interval.end)) for i in [first, second]],
  'errors': {{k: str(v) for k, v in bag.import_errors.items()}},
  'tasks': {{t.task_id: sorted(t.downstream_task_ids) for t in dag.tasks}},
  'trigger_rules': {{t.task_id: str(getattr(t.trigger_rule, 'value', t.trigger_rule)) for t in dag.tasks}},
  'owners': sorted({{t.owner for t in dag.tasks}}),
  'retries': sorted({{t.retries for t in dag.tasks}}),
  'tags': sorted(dag.tags), 'timetable': type(dag.timetable).__name__, 'cron': timetable.summary,
}}))
"""
    env = _airflow_env(tmp_path)
    env.pop("JOULEHOUSE_DAG_RETRIES")
    env.pop("JOULEHOUSE_START_DATE", None)
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    import json

    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["errors"] == {}
    assert info["owners"] == ["joulehouse"] and info["retries"] == [2] and "joulehouse" in info["tags"]
    # no start date named: no catchup from the default's long-past day (dag_env.catchup)
    assert info["catchup"] is False and info["max_active_runs"] == 1
    # Daily on data intervals: the run at D+1 01:00 processes day D (its interval's start), once
    # D is over and its last files shipped; "@daily" in Airflow 3 would run at D 00:00 for D.
    assert (info["timetable"], info["cron"]) == ("CronDataIntervalTimetable", "0 1 * * *")
    assert info["runs"] == [["2026-01-02 01:00:00+00:00", "2026-01-01 01:00:00+00:00", "2026-01-02 01:00:00+00:00"],
                            ["2026-01-03 01:00:00+00:00", "2026-01-02 01:00:00+00:00", "2026-01-03 01:00:00+00:00"]]
    assert info["dags"] == ["joulehouse_daily", "joulehouse_publish"]
    assert info["mapped"] == ["inspect_and_compact_lake_partition"], "the per-host lake work is one mapped task per host"
    # the warehouse day is fresh for downstream DAGs once its checks passed
    assert info["outlets"] == {"check_data": ["joulehouse_warehouse_day"],
                               "export_recommended_config": ["joulehouse_recommended_config"]}
    assert "joulehouse_recommended_config" in info["publish_schedule"]
    assert len(info["callbacks"]) == len(info["tasks"]), "every task says what failed"
    assert info["publish_callbacks"], "the publish DAG's tasks say what failed too"
    tasks = info["tasks"]
    order = ["build_warehouse", "check_data", "fit_power_models", "measure_efficiency_and_outcomes",
             "account_carbon_and_cost", "recommend_power_limits", "export_recommended_config", "render_report"]
    # One DuckDB writer at a time: the steps that write the warehouse form one chain.
    for upstream, downstream in zip(order, order[1:]):
        assert downstream in tasks[upstream], f"{upstream} must run before {downstream}"
    assert tasks["render_report"] == []
    # Great Expectations off the critical path: after the SQL gate, beside the models, before the report.
    assert "validate_data" in tasks["check_data"] and tasks["validate_data"] == ["warnings_done"]
    assert tasks["warnings_done"] == ["render_report"]
    # ...and a failure of it (GX's import, a suite) still leaves the day its report
    assert info["trigger_rules"]["warnings_done"] == "all_done"
    assert info["trigger_rules"]["render_report"] == "all_success"  # but never without the export
    assert "validate_data" not in tasks["fit_power_models"] and "fit_power_models" not in tasks["validate_data"]
