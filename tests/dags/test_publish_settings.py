"""joulehouse_publish publishes each export with the settings file it was written with.

Before, the daily DAG's export event said only its day, and the publish DAG published with
JOULEHOUSE_CONFIG whatever the run was given: a daily run triggered with dag_run.conf["config"] =
fleet B's settings wrote B's signed config into B's out_dir, then the publish copied A's export
folder to A's publish_url (A's old config again) and B's agents never got theirs; with one shared
publish_url, A's settings went to B's agents."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from joulehouse.daily_conf import RunConfError, publish_configs

REPO = Path(__file__).resolve().parents[2]
DAY = dt.date(2026, 6, 10)


@pytest.fixture()
def etc(tmp_path) -> Path:
    """Settings files in the deployment's folder (that of JOULEHOUSE_CONFIG), and one outside it."""
    site = tmp_path / "etc"
    site.mkdir()
    (tmp_path / "tmp").mkdir()
    (site / "link.toml").symlink_to(tmp_path / "tmp" / "evil.toml")
    return site


def test_each_events_settings_file_is_published_once_and_old_events_keep_joulehouse_config(etc):
    deployed = {"JOULEHOUSE_CONFIG": str(etc / "a.toml")}
    fleet_b = str(etc / "b.toml")
    extras = [{"day": "2026-06-10", "config": fleet_b},
              {"day": "2026-06-11", "config": str(etc / "." / "b.toml")},  # the same file, spelt otherwise
              {"day": "2026-06-09"},  # written before events named their settings file
              {"day": "2026-06-11", "config": None}]  # a run on JOULEHOUSE_CONFIG's settings
    assert publish_configs(extras, deployed) == [fleet_b, str(etc / "a.toml")]
    assert publish_configs([{"day": "2026-06-09"}], deployed) == [str(etc / "a.toml")]
    # A run triggered by hand, with no event: JOULEHOUSE_CONFIG's export, as before.
    assert publish_configs([], deployed) == [str(etc / "a.toml")]
    assert publish_configs([{"day": "2026-06-09"}], {}) == [None]  # the built-in settings
    # A's file named by an event and JOULEHOUSE_CONFIG are one file: published once.
    assert publish_configs([{"config": str(etc / "a.toml")}, {}], deployed) == [str(etc / "a.toml")]


def test_an_event_naming_settings_outside_the_allowed_folders_is_refused_before_any_is_read(etc):
    """Asset events can be posted through the REST API with any extra: a file outside the
    folders a daily run may take settings from is refused, naming the event, as run_config does."""
    deployed = {"JOULEHOUSE_CONFIG": str(etc / "a.toml")}
    outside = etc.parent / "tmp" / "evil.toml"  # it does not exist: a read would say so instead
    for hostile in (str(outside), str(etc / "link.toml"), str(etc / ".." / "tmp" / "evil.toml")):
        extras = [{"day": "2026-06-10", "config": str(etc / "b.toml")}, {"day": "2026-06-11", "config": hostile}]
        with pytest.raises(RunConfError) as refused:
            publish_configs(extras, deployed)
        said = str(refused.value)
        assert "\n" not in said
        assert said.startswith(f"the recommended-config event of day 2026-06-11: extra['config']={hostile!r}: "
                               f"not in a folder this deployment takes settings files from ({etc})")
        assert "JOULEHOUSE_CONFIG_DIRS" in said
    with pytest.raises(RunConfError, match=r"extra\['config'\]=5: must be the path of a settings file"):
        publish_configs([{"day": "2026-06-10", "config": 5}], deployed)
    listed = {"JOULEHOUSE_CONFIG_DIRS": str(outside.parent), **deployed}
    assert publish_configs([{"config": str(outside)}], listed) == [str(outside)]


# The daily DAG for fleet B (dag_run.conf["config"]), JOULEHOUSE_CONFIG naming fleet A; then the
# publish DAG run as the scheduler makes it, consuming the daily run's asset events.
CHILD = """
import datetime as dt, json, os, sys
from unittest import mock
from airflow.utils import db
db.upgradedb()
from airflow.dag_processing.dagbag import DagBag
from airflow.models import dagrun as dagrun_module
from airflow.models.asset import AssetEvent
from airflow.settings import Session

day, fleet_b = sys.argv[1], sys.argv[2]
bag = DagBag(dag_folder=os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
logical = dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc)
# The report and Great Expectations' suites come after or beside the export: not needed here.
run = bag.dags["joulehouse_daily"].test(logical_date=logical, run_conf={"day": day, "config": fleet_b},
                                        mark_success_pattern="validate_data|render_report")
print("DAILY", run.state, flush=True)
session = Session()
events = session.query(AssetEvent).order_by(AssetEvent.id).all()
print("EVENTS", json.dumps([[e.asset.name, e.extra] for e in events]), flush=True)
real = dagrun_module.get_or_create_dagrun

def consuming_the_events(**kwargs):
    run = real(**kwargs)
    run.consumed_asset_events.extend(e for e in events if e.asset.name == "joulehouse_recommended_config")
    kwargs["session"].commit()
    return run

with mock.patch.object(dagrun_module, "get_or_create_dagrun", consuming_the_events):
    run = bag.dags["joulehouse_publish"].test(logical_date=logical + dt.timedelta(hours=1))
print("PUBLISH", run.state, flush=True)
"""


@pytest.mark.slow
def test_a_run_given_another_fleets_settings_publishes_that_fleets_export(tmp_path, shared_data):
    from joulehouse.cli.dagrun import airflow_env
    from joulehouse.cli.demo_run import demo_settings
    from joulehouse.collectors.config_contract import generate_keypair
    from joulehouse.collectors.sim import simulate_fleet
    from joulehouse.settings import settings_to_toml

    etc = tmp_path / "etc"
    etc.mkdir()
    fleet_a, fleet_b = tmp_path / "a", tmp_path / "b"
    (etc / "a.toml").write_text(f'[export]\nout_dir = "{fleet_a / "export"}"\n'
                                f'publish_url = "{fleet_a / "published"}"\n', encoding="utf-8")
    settings = demo_settings(fleet_b, shared_data)
    toml = settings_to_toml(settings)
    assert toml.count('publish_url = ""') == 1
    (etc / "b.toml").write_text(toml.replace('publish_url = ""', f'publish_url = "{fleet_b / "published"}"'),
                                encoding="utf-8")
    simulate_fleet(Path(settings.lake.path), gpus=2, days=1, start=DAY, seed=3, interval_s=60.0)
    generate_keypair(fleet_b / "keys")

    env = airflow_env(tmp_path / "airflow", REPO / "dags")
    env.update(JOULEHOUSE_CONFIG=str(etc / "a.toml"), JOULEHOUSE_START_DATE=DAY.isoformat(),
               JOULEHOUSE_FAILURE_LOG=str(tmp_path / "failures.jsonl"))
    env.pop("JOULEHOUSE_CONFIG_DIRS", None)
    out = subprocess.run([sys.executable, "-c", CHILD, DAY.isoformat(), str(etc / "b.toml")], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    failures = (tmp_path / "failures.jsonl").read_text() if (tmp_path / "failures.jsonl").exists() else ""
    assert "DAILY success" in out.stdout, failures
    events = json.loads(next(line for line in out.stdout.splitlines() if line.startswith("EVENTS "))[7:])
    assert ["joulehouse_recommended_config", {"day": str(DAY), "config": str((etc / "b.toml").resolve())}] in events
    assert "PUBLISH success" in out.stdout, failures
    exported = fleet_b / "export" / "recommended-config.json"
    assert (fleet_b / "published" / "recommended-config.json").read_bytes() == exported.read_bytes()
    assert not (fleet_a / "published").exists(), "fleet A's agents were sent nothing"
