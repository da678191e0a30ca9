"""`joulehouse settings`: a commented settings file that loads back to what it prints, and the
example in infra/ kept in step with the code."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from joulehouse.settings import Settings, load_settings, settings_to_toml
from joulehouse.cli.main import app

REPO = Path(__file__).resolve().parents[2]


def _no_overrides(monkeypatch):
    for key in [k for k in os.environ if k.startswith("JOULEHOUSE_")]:
        monkeypatch.delenv(key)


def test_the_printed_file_loads_back_to_the_same_settings_with_each_key_explained(tmp_path, monkeypatch):
    _no_overrides(monkeypatch)
    # The defaults' relative paths are the working directory's, the file's its folder's: the same
    # places when the file is written where the command runs (settings_to_toml writes them absolute).
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 0, result.output
    path = tmp_path / "joulehouse.toml"
    path.write_text(result.output)
    assert settings_to_toml(load_settings(path, env={})) == settings_to_toml(Settings())
    assert load_settings(path, env={}).lake.path == str(tmp_path / "var" / "lake")
    lines = result.output.splitlines()
    at = lines.index("readings_retention_days = 35")
    assert lines[at - 1].startswith("# ") and "0 keeps every day" in " ".join(lines[at - 5:at])


def test_a_site_file_and_the_environment_are_what_it_prints(tmp_path, monkeypatch):
    site = tmp_path / "site.toml"
    site.write_text('[lake]\npath = "s3://fleet/lake"\n')
    monkeypatch.setenv("JOULEHOUSE_WAREHOUSE__READINGS_RETENTION_DAYS", "60")
    result = CliRunner().invoke(app, ["settings", "--config", str(site)])
    assert result.exit_code == 0, result.output
    assert 'path = "s3://fleet/lake"' in result.output and "readings_retention_days = 60" in result.output
    monkeypatch.delenv("JOULEHOUSE_WAREHOUSE__READINGS_RETENTION_DAYS")
    bad = tmp_path / "bad.toml"
    bad.write_text("[warehouse]\nreadings_retention_days = 3\n")
    result = CliRunner().invoke(app, ["settings", "--config", str(bad)])
    assert result.exit_code == 2 and "readings_retention_days = 3" in result.output


def test_a_password_that_is_set_is_not_printed(monkeypatch):
    _no_overrides(monkeypatch)
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__IPMI_PASSWORD", "hunter2")
    result = CliRunner().invoke(app, ["settings"])
    assert result.exit_code == 0 and "hunter2" not in result.output
    assert 'ipmi_password = "********"' in result.output


def test_each_key_shows_its_range():
    result = CliRunner().invoke(app, ["settings"], env={})
    lines = result.output.splitlines()
    at = lines.index("default_pue = 1.3")
    assert lines[at - 1] == "# range: >= 1 and <= 10"
    assert lines[lines.index('engine = "duckdb"') - 1] == "# one of: duckdb, spark"


def test_the_example_in_infra_is_the_current_defaults(monkeypatch):
    """Regenerate with `joulehouse settings > infra/joulehouse.example.toml` after adding a field."""
    _no_overrides(monkeypatch)
    result = CliRunner().invoke(app, ["settings"])
    assert (REPO / "infra" / "joulehouse.example.toml").read_text() == result.output


def test_list_settings_keep_their_item_type(tmp_path):
    """A list of seconds read from a file or the environment is numbers, not strings."""
    from joulehouse.settings import SettingsError

    path = tmp_path / "joulehouse.toml"
    path.write_text("[models]\nactivity_hold_grid_s = [0, 1.5]\n")
    assert load_settings(path, env={}).models.activity_hold_grid_s == (0.0, 1.5)
    env = {"JOULEHOUSE_MODELS__ACTIVITY_HOLD_GRID_S": "0, 2.5"}
    assert load_settings(env=env).models.activity_hold_grid_s == (0.0, 2.5)
    path.write_text('[models]\nactivity_hold_grid_s = [0, "soon"]\n')
    try:
        load_settings(path, env={})
    except SettingsError as exc:
        assert "activity_hold_grid_s[1]" in str(exc)
    else:
        raise AssertionError("a word in a list of seconds must be refused")


def test_a_settings_file_the_cli_writes_is_private_and_reads_back_with_control_characters(tmp_path):
    """`joulehouse run` without --config wrote every setting, the IPMI password too, into a file
    anyone could read (0644); and a control character in a value was written raw, which no TOML
    reader takes back."""
    import dataclasses

    from joulehouse.settings import CollectorSettings, AgentSettings, replace_section, write_settings_file

    settings = replace_section(Settings(), collector=dataclasses.replace(CollectorSettings(), ipmi_password="s3cret"),
                               agent=dataclasses.replace(AgentSettings(), site="a\x01b\nc\td"))
    path = write_settings_file(tmp_path / "joulehouse.toml", settings)
    assert path.stat().st_mode & 0o777 == 0o600
    loaded = load_settings(path, env={})
    assert loaded.agent.site == "a\x01b\nc\td" and loaded.collector.ipmi_password == "s3cret"



@pytest.mark.parametrize("env, said", [
    # the first DCGM range (now - lookback .. now - settle) was empty at every poll: nothing recorded, exit 0
    ({"JOULEHOUSE_COLLECTOR__DCGM_INITIAL_LOOKBACK_S": "30"}, "dcgm_initial_lookback_s = 30 must be at least"),
    # taken here, refused by the DCGM source at start-up: its unit restarted every 5 s
    ({"JOULEHOUSE_COLLECTOR__PROMETHEUS_STEP_S": "0.5"}, "prometheus_step_s = '0.5'"),
    # the timer thread raised OverflowError, and no limit held
    ({"JOULEHOUSE_WAREHOUSE__QUERY_TIMEOUT_S": "1e10"}, "query_timeout_s = '1e10'"),
])
def test_settings_a_component_cannot_run_with_are_refused_when_read(env, said):
    from joulehouse.settings import SettingsError

    with pytest.raises(SettingsError, match=said.replace("(", r"\(")):
        load_settings(None, env=env)


def test_joulehouse_config_is_the_settings_file_when_no_config_is_given(tmp_path, monkeypatch):
    """The DAG reads JOULEHOUSE_CONFIG, and the README has the analytics host export it; `settings`
    (and `run`, `sql`, the estimates) ignored it and showed the built-in defaults."""
    _no_overrides(monkeypatch)
    site = tmp_path / "site.toml"
    site.write_text('[lake]\npath = "/srv/lake"\n')
    monkeypatch.setenv("JOULEHOUSE_CONFIG", str(site))
    shown = CliRunner().invoke(app, ["settings"])
    assert shown.exit_code == 0 and 'path = "/srv/lake"' in shown.output
    other = tmp_path / "other.toml"
    other.write_text('[lake]\npath = "/srv/other"\n')
    assert 'path = "/srv/other"' in CliRunner().invoke(app, ["settings", "--config", str(other)]).output  # --config first


@pytest.mark.parametrize("command", [["settings"], ["sql", "--db", "w.duckdb", "SELECT 1"],
                                     ["carbon", "estimate", "--hours", "1", "--gpu-model", "H100-SXM"]])
def test_a_bad_file_from_joulehouse_config_is_said_to_come_from_it(tmp_path, monkeypatch, command):
    """A user who never typed the file's name is told where it came from, and how to override it;
    with --config the line stays as it was."""
    _no_overrides(monkeypatch)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("JOULEHOUSE_CONFIG", str(tmp_path / "gone.toml"))
    said = CliRunner().invoke(app, command)
    assert said.exit_code == 2
    assert "gone.toml does not exist (the file JOULEHOUSE_CONFIG names; --config overrides it)" in said.output
    typed = CliRunner().invoke(app, [*command, "--config", str(tmp_path / "typed.toml")])
    assert typed.exit_code == 2 and "typed.toml does not exist" in typed.output
    assert "JOULEHOUSE_CONFIG" not in typed.output
