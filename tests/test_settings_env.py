"""A JOULEHOUSE_* environment variable that names no setting stops the settings load in one line.

Before: pydantic-settings silently ignored JOULEHOUSE_COLLECTOR_INTERVAL_S=5 (one underscore where
the section and the field take two), and the collector ran at its default interval, nobody told.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.settings import SettingsError, load_node_settings
from joulehouse.collectors.settings_env import NOT_SETTINGS
from joulehouse.settings import Settings, load_settings

REPO = Path(__file__).resolve().parents[1]

# (variable, what the line must say): each was ignored without a word before.
NEAR_MISSES = [
    ("JOULEHOUSE_COLLECTOR_INTERVAL_S",
     "JOULEHOUSE_COLLECTOR_INTERVAL_S names no setting; did you mean JOULEHOUSE_COLLECTOR__INTERVAL_S?"),
    ("JOULEHOUSE_AGENT_CONFIG_URL", "JOULEHOUSE_AGENT_CONFIG_URL names no setting; did you mean JOULEHOUSE_AGENT__CONFIG_URL?"),
    ("JOULEHOUSE_LAKE_PATH", "JOULEHOUSE_LAKE_PATH names no setting; did you mean JOULEHOUSE_LAKE__PATH?"),
    ("joulehouse_collector_ipmi_password",  # read case-insensitively, so refused so too
     "joulehouse_collector_ipmi_password names no setting; did you mean JOULEHOUSE_COLLECTOR__IPMI_PASSWORD?"),
    ("JOULEHOUSE_COLLECTOR__INTERVAL_S__MAX",
     "JOULEHOUSE_COLLECTOR__INTERVAL_S__MAX names no setting; did you mean JOULEHOUSE_COLLECTOR__INTERVAL_S?"),
    ("JOULEHOUSE_CONFG", "JOULEHOUSE_CONFG names no setting; did you mean JOULEHOUSE_CONFIG?"),
]


@pytest.fixture(autouse=True)
def no_overrides(monkeypatch):
    """Only the variables a test sets: the machine's own JOULEHOUSE_* would change what loads."""
    for key in [k for k in os.environ if k.upper().startswith("JOULEHOUSE_")]:
        monkeypatch.delenv(key)


@pytest.mark.parametrize(("key", "line"), NEAR_MISSES, ids=[k for k, _ in NEAR_MISSES])
@pytest.mark.parametrize("load", [load_settings, load_node_settings], ids=["analytics", "node"])
def test_a_near_miss_in_the_environment_is_refused_with_the_name_meant(monkeypatch, load, key, line):
    monkeypatch.setenv(key, "5")
    with pytest.raises(SettingsError) as caught:
        load()  # the process environment, as every command reads it
    assert str(caught.value) == line


@pytest.mark.parametrize(("key", "line"), [
    ("JOULEHOUSE_FOO", "JOULEHOUSE_FOO names no setting (settings are JOULEHOUSE_<SECTION>__<FIELD>)"),
    ("JOULEHOUSE_COLLECTOR__COLOUR", "JOULEHOUSE_COLLECTOR__COLOUR names no setting"),
    # a whole section as JSON was read by pydantic-settings; `=x` ended in its traceback in `agent run`
    ("JOULEHOUSE_COLLECTOR",
     "JOULEHOUSE_COLLECTOR names a settings section, not a setting; set JOULEHOUSE_COLLECTOR__<FIELD> for each field"),
])
def test_a_name_far_from_any_setting_is_refused_without_a_guess(monkeypatch, key, line):
    monkeypatch.setenv(key, '{"interval_s": 5}')
    with pytest.raises(SettingsError) as caught:
        load_node_settings()
    assert str(caught.value) == line


def test_every_unknown_variable_is_named_in_the_one_line(monkeypatch):
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR_INTERVAL_S", "5")
    monkeypatch.setenv("JOULEHOUSE_TCO_RACK_KW", "30")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert "\n" not in message
    assert "JOULEHOUSE_COLLECTOR_INTERVAL_S names no setting; did you mean JOULEHOUSE_COLLECTOR__INTERVAL_S?" in message
    assert "JOULEHOUSE_TCO_RACK_KW names no setting; did you mean JOULEHOUSE_TCO__RACK_KW?" in message


def test_the_node_leaves_the_analytics_fields_to_them_but_not_a_misspelt_name(monkeypatch):
    """The node cannot check [carbon] fields without importing the analytics; it still knows the
    section, so a single underscore is caught on the node too."""
    monkeypatch.setenv("JOULEHOUSE_CARBON__REGION", "FR")
    load_node_settings()
    monkeypatch.setenv("JOULEHOUSE_CARBON_REGION", "FR")
    with pytest.raises(SettingsError, match=r"^JOULEHOUSE_CARBON_REGION names no setting; did you mean "
                                            r"JOULEHOUSE_CARBON__REGION\?$"):
        load_node_settings()


def test_the_variables_the_project_reads_itself_and_the_real_settings_load(monkeypatch):
    for key in NOT_SETTINGS:
        monkeypatch.setenv(key, "1")
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__INTERVAL_S", "5")
    monkeypatch.setenv("joulehouse_tco__rack_kw", "30")
    settings = load_settings()
    assert (settings.collector.interval_s, settings.tco.rack_kw) == (5.0, 30.0)
    assert load_node_settings().collector.interval_s == 5.0
    assert Settings() == load_settings(env={key: "1" for key in NOT_SETTINGS})


def test_the_allow_list_is_every_non_setting_variable_the_project_names():
    """A new JOULEHOUSE_* variable read outside the settings must be added to NOT_SETTINGS (or every
    load with it set fails); one no longer read must leave it (or its typo is let through)."""
    # printed into the Airflow child's log by `joulehouse run`, never read from the environment
    log_markers = {"JOULEHOUSE_DAY", "JOULEHOUSE_RESULT", "JOULEHOUSE_BATCH_DONE"}
    # where variables are read or set (code, units); not the prose, which quotes wrong names as examples
    folders = ["collectors", "joulehouse", "models", "reports", "warehouse", "dags", "bench", "infra", "tests/nvml_stub"]
    files = [p for folder in folders for p in (REPO / folder).rglob("*")
             if p.suffix in (".py", ".c", ".service", ".timer", ".toml", ".sh") and p.name != "settings_env.py"]
    files += [REPO / "Makefile", REPO / ".ci" / "run"]
    named = {m for p in files if p.is_file() for m in re.findall(r"\bJOULEHOUSE_[A-Z0-9_]*[A-Z0-9]\b", p.read_text())}
    assert {n for n in named if "__" not in n} - log_markers == set(NOT_SETTINGS)


@pytest.mark.parametrize("argv", [
    ["collect", "--source", "sim", "--max-polls", "1"],
    ["agent", "run", "--export-url", "nowhere.json", "--iterations", "1"],
    ["settings"],
], ids=["collect", "agent-run", "settings"])
def test_each_command_stops_before_any_work_in_one_line(tmp_path, argv):
    lake = tmp_path / "lake"
    result = CliRunner().invoke(app, [*argv, *(["--lake", str(lake)] if argv[0] != "settings" else [])],
                                env={"JOULEHOUSE_COLLECTOR_INTERVAL_S": "5"})
    assert result.exit_code == 2, result.output
    assert result.output == ("error: JOULEHOUSE_COLLECTOR_INTERVAL_S names no setting; did you mean "
                             "JOULEHOUSE_COLLECTOR__INTERVAL_S?\n")
    assert not lake.exists()


def test_the_installed_command_refuses_it_in_one_line_on_stderr(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("JOULEHOUSE_")}
    env["JOULEHOUSE_COLLECTOR_INTERVAL_S"] = "5"
    out = subprocess.run([sys.executable, "-m", "joulehouse", "collect", "--source", "sim", "--max-polls", "1",
                          "--lake", str(tmp_path / "lake")], env=env, capture_output=True, text=True, timeout=120)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == ("error: JOULEHOUSE_COLLECTOR_INTERVAL_S names no setting; did you mean "
                          "JOULEHOUSE_COLLECTOR__INTERVAL_S?\n")
    assert not (tmp_path / "lake").exists()
