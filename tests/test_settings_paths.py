"""Relative paths in a settings file are the file's folder's, wherever the command runs; from the
environment or code they stay the working directory's (collectors.settings.RelativeToFile)."""

from __future__ import annotations

import os

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.settings import load_node_settings, write_settings_file
from joulehouse.settings import LakeSettings, Settings, WarehouseSettings, load_settings, replace_section

SITE = """\
[lake]
path = "lake"
[collector]
spool_dir = "../spool"
dcgm_state_path = "state/dcgm.json"
[warehouse]
db_path = "./w.duckdb"
inventory_path = ""
[models]
clock_sweep_files = ["A100|sweeps/a100.csv", "H100 | /data/h100.csv", "sweeps/any.csv"]
[agent]
public_key_path = "keys/site.pub.pem"
config_url = "https://configs.example/site-a.json"
state_path = "/var/lib/joulehouse-agent/applied.json"
[carbon]
grid_file = "grid/caiso.csv"
[tco]
tariff_file = "tariffs/urdb.json"
[export]
out_dir = "export"
private_key_path = "keys/site.pem"
publish_url = "s3://configs/site-a"
"""


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A settings file in etc/, the command started in elsewhere/."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "elsewhere").mkdir()
    path = tmp_path / "etc" / "site.toml"
    path.write_text(SITE)
    monkeypatch.chdir(tmp_path / "elsewhere")
    return path


def test_relative_paths_in_the_file_are_its_folders_not_the_working_directorys(site):
    etc = site.parent
    for settings in (load_settings(site, env={}), load_settings("../etc/site.toml", env={})):
        assert settings.lake.path == str(etc / "lake")
        assert settings.warehouse.db_path == str(etc / "w.duckdb")
        assert (settings.collector.spool_dir, settings.collector.dcgm_state_path) == (str(etc / "../spool"),
                                                                                      str(etc / "state" / "dcgm.json"))
        assert settings.agent.public_key_path == str(etc / "keys" / "site.pub.pem")
        assert settings.models.clock_sweep_files == (f"A100|{etc / 'sweeps' / 'a100.csv'}", "H100 | /data/h100.csv",
                                                     str(etc / "sweeps" / "any.csv"))
        # none given (""), a URL and an absolute path are kept as written
        assert settings.warehouse.inventory_path == ""
        assert settings.agent.config_url == "https://configs.example/site-a.json"
        assert settings.agent.state_path == "/var/lib/joulehouse-agent/applied.json"
        # the analytics' files too: the grid, the tariff, the export and its signing key
        assert (settings.carbon.grid_file, settings.tco.tariff_file) == (str(etc / "grid" / "caiso.csv"),
                                                                         str(etc / "tariffs" / "urdb.json"))
        assert (settings.export.out_dir, settings.export.private_key_path) == (str(etc / "export"),
                                                                               str(etc / "keys" / "site.pem"))
        assert settings.export.publish_url == "s3://configs/site-a"
    # the node reads its sections of the same file the same way
    node = load_node_settings(site, env={})
    assert (node.lake.path, node.agent.public_key_path) == (str(etc / "lake"), str(etc / "keys" / "site.pub.pem"))


def test_paths_from_the_environment_or_the_defaults_stay_the_working_directorys(site):
    settings = load_settings(site, env={"JOULEHOUSE_LAKE__PATH": "lake-from-env",
                                        "JOULEHOUSE_MODELS__CLOCK_SWEEP_FILES": "A100|sweeps/env.csv"})
    assert settings.lake.path == "lake-from-env"
    assert settings.models.clock_sweep_files == ("A100|sweeps/env.csv",)
    assert settings.agent.state_path == "/var/lib/joulehouse-agent/applied.json"
    # a key the file does not give keeps its default, the working directory's
    assert load_settings(site, env={}).collector.proc_root == Settings().collector.proc_root == "/proc"
    assert load_settings(site, env={}).warehouse.spark_master == "local[2]"  # not a path: as written
    assert load_settings(None, env={}).lake.path == "var/lake"


def test_a_file_written_elsewhere_keeps_the_working_directorys_places(tmp_path, monkeypatch):
    """`joulehouse run` without --config writes the settings it runs with under its Airflow home,
    and the DAG reads them from there: relative paths are written absolute."""
    monkeypatch.chdir(tmp_path)
    settings = replace_section(Settings(), lake=LakeSettings(path="var/lake"),
                               warehouse=WarehouseSettings(db_path="var/warehouse.duckdb"))
    (tmp_path / "var" / "airflow").mkdir(parents=True)
    written = write_settings_file(tmp_path / "var" / "airflow" / "joulehouse.toml", settings)
    loaded = load_settings(written, env={})
    assert (loaded.lake.path, loaded.warehouse.db_path) == (str(tmp_path / "var" / "lake"),
                                                            str(tmp_path / "var" / "warehouse.duckdb"))
    assert loaded.models == settings.models and loaded.carbon == settings.carbon


def test_the_commands_name_the_files_folders_path(site):
    etc = site.parent
    site.write_text('[lake]\npath = "lake"\n')
    result = CliRunner().invoke(app, ["settings", "--config", str(site)], env={})
    assert result.exit_code == 0, result.output
    assert f'path = "{etc / "lake"}"' in result.output.splitlines()
    # an input file that is not there is named where the command looked for it
    site.write_text('[warehouse]\ninventory_path = "inventory.csv"\n')
    result = CliRunner().invoke(app, ["settings", "--config", str(site)], env={})
    assert result.exit_code == 2
    assert f"[warehouse].inventory_path {etc / 'inventory.csv'} (in {site}): does not exist" in result.output
    (etc / "inventory.csv").write_text("host,gpu_uuid\n")
    assert CliRunner().invoke(app, ["settings", "--config", str(site)], env={}).exit_code == 0


def test_run_looks_for_the_lake_beside_its_settings_file(site):
    """`joulehouse run --config etc/site.toml` with path = "lake" reads etc/lake, not ./lake."""
    site.write_text('[lake]\npath = "lake"\n')
    (site.parent.parent / "elsewhere" / "lake").mkdir()  # the working directory's lake is not the one meant
    result = CliRunner().invoke(app, ["run", "--date", "2026-06-11", "--config", "../etc/site.toml"], env={})
    assert result.exit_code == 2
    assert f"the lake {site.parent / 'lake'} ([lake] path)" in " ".join(result.output.split())


def test_a_home_path_in_the_file_is_the_users_home_not_a_folder_named_tilde(tmp_path, monkeypatch):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "site.toml").write_text('[warehouse]\ndb_path = "~/wh.duckdb"\n')
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert load_settings(tmp_path / "etc" / "site.toml", env={}).warehouse.db_path == str(tmp_path / "home" / "wh.duckdb")


def test_the_printout_of_a_file_means_the_same_paths_once_saved_elsewhere(tmp_path, monkeypatch):
    """`joulehouse settings --config F > saved.toml`: its defaults (dcgm_state_path, the agent's
    state) were printed relative, and read back from saved.toml they named the saved file's folder."""
    for folder in ("etc", "elsewhere", "saved"):
        (tmp_path / folder).mkdir()
    (tmp_path / "etc" / "site.toml").write_text('[lake]\npath = "lake"\n')
    monkeypatch.chdir(tmp_path / "elsewhere")
    printed = CliRunner().invoke(app, ["settings", "--config", str(tmp_path / "etc" / "site.toml")], env={})
    assert printed.exit_code == 0, printed.output
    (tmp_path / "saved" / "saved.toml").write_text(printed.output)
    first, again = (load_settings(tmp_path / f, env={}) for f in ("etc/site.toml", "saved/saved.toml"))
    assert again.lake.path == first.lake.path == str(tmp_path / "etc" / "lake")
    # the defaults are the working directory's when run, and the saved file says so
    assert again.collector.dcgm_state_path == os.path.abspath(first.collector.dcgm_state_path) == \
        str(tmp_path / "elsewhere" / "var" / "state" / "dcgm-watermark.json")
    assert (again.warehouse.db_path, again.export.private_key_path) == (
        os.path.abspath(first.warehouse.db_path), os.path.abspath(first.export.private_key_path))
