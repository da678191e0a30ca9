"""The node reads its own sections of the site's settings file ([lake], [collector], [agent]),
checked like every other, and imports no analytics package to do it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from joulehouse.collectors.settings import NodeSettings, SettingsError, load_node_settings


def test_the_node_reads_its_sections_and_leaves_the_analytics_ones_to_the_analytics(tmp_path):
    path = tmp_path / "joulehouse.toml"
    # A site's one file: the analytics' sections are not the node's to check (even a wrong one).
    path.write_text('[collector]\ninterval_s = 0.5\n[agent]\nconfig_url = "https://x/config.json"\n'
                    "[carbon]\ndefault_pue = 0.5\n[warehouse]\nthreads = 8\n")
    node = load_node_settings(path, env={"JOULEHOUSE_CARBON__DEFAULT_PUE": "-1", "JOULEHOUSE_AGENT__POLL_INTERVAL_S": "60"})
    assert (node.collector.interval_s, node.agent.config_url, node.agent.poll_interval_s) == (0.5, "https://x/config.json", 60.0)


@pytest.mark.parametrize(("text", "env", "expected"), [
    ("[colector]\ninterval_s = 1\n", {}, "unknown settings section [colector]"),
    ("", {"JOULEHOUSE_AGNET__CONFIG_URL": "x"}, "JOULEHOUSE_AGNET__CONFIG_URL: unknown settings section 'agnet'"),
    ("[collector]\nroll_interval_s = -300\n", {}, "[collector].roll_interval_s = -300"),
    ("", {"JOULEHOUSE_COLLECTOR__IPMI_PORT": "70000"}, "[collector].ipmi_port = '70000' (from JOULEHOUSE_COLLECTOR__IPMI_PORT)"),
], ids=["misspelt-section", "misspelt-override", "negative-interval", "port"])
def test_a_misspelt_section_or_a_bad_value_is_refused_on_the_node_too(tmp_path, text, env, expected):
    path = tmp_path / "joulehouse.toml"
    path.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load_node_settings(path, env=env)
    assert expected in str(caught.value)


def test_the_node_leaves_exactly_the_sections_of_the_analytics():
    from joulehouse.settings import Settings

    assert NodeSettings.foreign_sections == set(Settings.model_fields) - set(NodeSettings.model_fields)
    assert set(NodeSettings.model_fields) <= set(Settings.model_fields)


def test_reading_the_node_settings_imports_no_analytics_package(tmp_path):
    probe = ("import sys; from joulehouse.collectors.settings import load_node_settings; load_node_settings(env={}); "
             "print(sorted(m for m in sys.modules if m.split('.')[:2] in (['joulehouse', 'warehouse'], "
             "['joulehouse', 'models'], ['joulehouse', 'reports']) or m in ('joulehouse.settings', 'duckdb', 'polars')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "[]"


def test_the_command_starts_without_the_analytics_settings():
    """`joulehouse agent ...` on a node: the settings command imports the analytics' sections only
    when it runs."""
    probe = ("import sys; from joulehouse.cli.main import app; "
             "print(sorted(m for m in sys.modules if m.startswith(('joulehouse.models', 'joulehouse.reports')) "
             "or m == 'joulehouse.settings'))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("interval", ["nan", "inf"])
def test_a_non_finite_interval_on_the_command_line_is_refused_in_one_line(tmp_path, interval):
    """Before: `--interval nan` busy-looped at about 2,000 polls a second."""
    from typer.testing import CliRunner

    from joulehouse.cli.main import app

    result = CliRunner().invoke(app, ["collect", "--source", "sim", "--interval", interval, "--lake", str(tmp_path / "lake"),
                                      "--max-polls", "1"], env={})
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith("error: ") and "interval" in line and interval in line
    assert not (tmp_path / "lake").exists()
