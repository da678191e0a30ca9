"""`joulehouse agent run --interval`: the time between polls is 1 s to a day, refused in one line
otherwise, before any key, NVML or network is touched.

Before: `--interval 0.0001ms` polled NVML and the config endpoint in a busy loop, a huge one left a
revoked config's caps on the GPUs for good, `--interval-s 0` quietly meant the default and
`--interval-s -1` crashed the loop's sleep after its first poll; [agent] poll_interval_s = 1e-7
was taken too.
"""

from __future__ import annotations

import os

import pytest
import typer
from typer.testing import CliRunner

from joulehouse.cli.agent import register
from joulehouse.collectors.settings import SettingsError, load_node_settings

RANGE = "expected 1 s to 86,400 s (a day) between polls"


@pytest.fixture()
def app(tmp_path, monkeypatch):
    monkeypatch.setattr("joulehouse.cli.agent.NODE_DATA", tmp_path / "no-node-data")
    for key in [k for k in os.environ if k.upper().startswith("JOULEHOUSE_")]:
        monkeypatch.delenv(key)
    app = typer.Typer()
    register(app)
    return app


def run(app, tmp_path, *options):
    # No key file and no NVML here: a refused interval must be said before either is needed.
    return CliRunner().invoke(app, ["agent", "run", "--export-url", str(tmp_path / "config.json"), "--public-key",
                                    str(tmp_path / "missing.pub.pem"), "--lake", str(tmp_path / "lake"),
                                    "--iterations", "1", *options])


@pytest.mark.parametrize(("options", "line"), [
    (["--interval", "0.0001ms"], f"error: --interval 0.0001ms: {RANGE}"),
    (["--interval", "999ms"], f"error: --interval 999ms: {RANGE}"),
    (["--interval", "25h"], f"error: --interval 25h: {RANGE}"),
    (["--interval", "1e300s"], f"error: --interval 1e300s: {RANGE}"),
    (["--interval-s", "0"], f"error: --interval-s 0: {RANGE}"),
    (["--interval-s", "-1"], f"error: --interval-s -1: {RANGE}"),
    (["--interval-s", "nan"], f"error: --interval-s nan: {RANGE}"),
    (["--interval-s", "86401"], f"error: --interval-s 86401: {RANGE}"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_an_interval_out_of_range_is_refused_naming_the_option_and_the_range(app, tmp_path, options, line):
    result = run(app, tmp_path, *options)
    assert result.exit_code == 2, result.output
    assert result.output == line + "\n"
    assert not (tmp_path / "lake").exists()


@pytest.mark.parametrize("text", ["1s", "24h", "86400"])
def test_the_ends_of_the_range_are_accepted(app, tmp_path, text):
    """Past the interval: the missing key is what stops it, so the interval was taken."""
    result = run(app, tmp_path, "--interval", text)
    assert result.exit_code == 2 and "missing.pub.pem" in result.output and "between polls" not in result.output


@pytest.mark.parametrize("value", ["0.0001", "0.999", "86401", "1e308"])
def test_the_setting_has_the_same_range(value):
    with pytest.raises(SettingsError, match=r"^\[agent\]\.poll_interval_s = .* \(from JOULEHOUSE_AGENT__POLL_INTERVAL_S\): "):
        load_node_settings(env={"JOULEHOUSE_AGENT__POLL_INTERVAL_S": value})
    assert load_node_settings(env={"JOULEHOUSE_AGENT__POLL_INTERVAL_S": "1"}).agent.poll_interval_s == 1.0


@pytest.mark.parametrize("count", ["0", "-1"])
def test_iterations_below_one_are_refused(app, tmp_path, count):
    """`--iterations 0` exited 0 having polled nothing: a unit that 'ran' and applied no config."""
    result = CliRunner().invoke(app, ["agent", "run", "--export-url", str(tmp_path / "config.json"),
                                      "--public-key", str(tmp_path / "missing.pub.pem"), "--iterations", count])
    assert result.exit_code == 2 and "--iterations" in result.output and "missing.pub.pem" not in result.output
