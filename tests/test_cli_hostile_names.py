"""Careless or hostile names given to the CLI: an empty one is refused, not read as "every model"
or "the default"; a huge one, or one holding newlines and ANSI escapes, comes back in the error
bounded and escaped (a 100 kB --gpu-model was echoed whole; an escape in --lake reached the
terminal as written)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from nvml_stub.fixture import nvml_stub, nvml_stub_library  # noqa: F401

from agent_cli import off_a_node  # noqa: F401  (fixture)

HUGE = "A" * 100_000
# clears the screen, sets the window title, rings the bell, then a second line
ESCAPES = "\x1b[2J\x1b]0;pwned\x07H100\nsecond line"
RUN = ["--gpus", "8", "--days", "3"]


def _refused(args: list[str]) -> str:
    """The one error line of a refused command (exit 2)."""
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr[:300]
    return lines[0]


@pytest.mark.parametrize("command", ["carbon", "tco"])
@pytest.mark.parametrize("name", ["", "   "])
def test_an_empty_gpu_model_is_refused_not_taken_for_the_family_of_every_model(command, name):
    line = _refused([command, "estimate", "--gpu-model", name, *RUN])
    assert "--gpu-model" in line and "expected a GPU model name" in line
    assert "NVIDIA H200" not in line and "could be" not in line  # it listed all 25 models as candidates


# Options the CLI quotes itself: the value at most about 80 characters, whatever was typed.
QUOTED_BY_THE_CLI = [
    ["carbon", "estimate", "--gpu-model", "{}", *RUN],
    ["tco", "estimate", "--gpu-model", "{}", *RUN],
    ["carbon", "estimate", "--gpu-model", "H100-SXM", *RUN, "--region", "FR", "--start", "{}"],
    ["compact", "--lake", ".", "--date", "{}"],
    ["collect", "--source", "{}", "--lake", "lake"],
    ["agent", "apply", "export.json", "--public-key", "key.pem", "--dry-run", "--at", "{}"],
    ["ingest", "slurm", "jobs.txt", "--lake", "lake", "--assume-tz", "{}"],
]
# Options whose refusal comes from a layer below the CLI: the whole line bounded.
QUOTED_BELOW = [
    ["jobs", "predict-energy", "--from-gpu-model", "{}", "--to-gpu-model", "NVIDIA H200", "--energy-j", "1e6",
     "--time-s", "3600"],
    ["ingest", "nvidia-smi", "gpu-log.csv", "--lake", "lake", "--host", "{}"],
]


@pytest.fixture()
def inputs(tmp_path, monkeypatch):
    """A folder holding a small nvidia-smi log, so that a command gets as far as reading --host."""
    (tmp_path / "gpu-log.csv").write_text("timestamp, name, index, power.draw [W]\n"
                                          "2026/01/01 00:00:00.000, NVIDIA H200, 0, 300.00 W\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("args", QUOTED_BY_THE_CLI, ids=lambda a: " ".join(a[:3]))
def test_a_huge_name_is_quoted_in_at_most_about_80_characters(args, inputs):
    line = _refused([a.replace("{}", HUGE) for a in args])
    longest_run = max(len(run) for run in re.findall("A+", line))
    assert longest_run <= 80 and "(100,000 characters)" in line, line[:200]


@pytest.mark.parametrize("args", QUOTED_BY_THE_CLI + QUOTED_BELOW, ids=lambda a: " ".join(a[:3]))
def test_a_huge_name_never_floods_the_terminal(args, inputs):
    line = _refused([a.replace("{}", HUGE) for a in args])
    assert len(line) <= 1100  # it was the 100,000 characters, and more


@pytest.mark.parametrize("args", QUOTED_BY_THE_CLI + QUOTED_BELOW + [["compact", "--lake", "{}", "--date", "2026-01-01"]],
                         ids=lambda a: " ".join(a[:3]))
def test_control_characters_in_a_name_are_shown_escaped_not_sent_to_the_terminal(args, inputs):
    line = _refused([a.replace("{}", ESCAPES) for a in args])
    assert not any(c in line for c in "\x1b\x07"), repr(line)
    assert "\\x1b[2J" in line  # the reader still sees what was typed


def test_an_empty_price_node_is_refused_not_priced_by_the_default_node():
    line = _refused(["tco", "estimate", "--gpu-model", "H100-SXM", *RUN, "--start", "2026-03-02", "--price-node", ""])
    assert "pricing node ''" in line


@pytest.fixture()
def signed_export(tmp_path):
    """An export signed for node-01, valid now, and its public key."""
    from joulehouse.collectors.config_contract import dump_config, generate_keypair, load_private_key, sign_config

    private, public = generate_keypair(tmp_path / "keys")
    now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    body = {"schema_version": 1, "generated_at": f"{now:%Y-%m-%dT%H:%M:%SZ}",
            "valid_from": f"{now - dt.timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}",
            "valid_until": f"{now + dt.timedelta(days=1):%Y-%m-%dT%H:%M:%SZ}", "site": "site-a",
            "hosts": {"node-01": {"GPU-1": {"gpu_model": "NVIDIA H200", "workload_class": "background",
                                            "power_limit_w": 500.0, "expected_saving_pct": 18.0,
                                            "expected_slowdown_pct": 12.0}}},
            "excluded_gpu_models": []}
    export = tmp_path / "export.json"
    export.write_bytes(dump_config(sign_config(body, load_private_key(private))))
    return export, public


def test_an_empty_agent_host_is_refused_not_taken_for_this_machine(signed_export, nvml_stub, monkeypatch):  # noqa: F811
    nvml_stub.write([], errors={"nvmlInitWithFlags": "DRIVER_NOT_LOADED"})
    monkeypatch.setattr("socket.gethostname", lambda: "node-01")
    export, public = signed_export
    line = _refused(["agent", "apply", str(export), "--public-key", str(public), "--dry-run", "--host", ""])
    assert "--host ''" in line  # it checked node-01's settings, this machine's, and exited 0


def test_an_empty_export_url_is_refused_not_replaced_by_the_settings_one(signed_export, tmp_path):
    export, public = signed_export
    settings = tmp_path / "joulehouse.toml"
    settings.write_text(f'[agent]\nconfig_url = "{export.as_uri()}"\npublic_key_path = "{tmp_path / "absent.pem"}"\n')
    line = _refused(["agent", "run", "--config", str(settings), "--export-url", ""])
    assert "--export-url ''" in line


@pytest.fixture()
def tiny_warehouse(tmp_path):
    import duckdb

    path = tmp_path / "w.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE t AS SELECT 1 AS a")
    return path


@pytest.mark.parametrize("args", [
    pytest.param(["SELECT * FROM " + "x" * 100_000], id="a 100 kB table name DuckDB quotes whole"),
    pytest.param(["--saved", HUGE], id="a 100 kB saved-query name"),
    pytest.param(["SELECT '" + ESCAPES.replace("\n", " ") + "'::INT"], id="a string of escapes DuckDB quotes raw"),
])
def test_a_sql_error_comes_back_bounded_and_printable(args, tiny_warehouse):
    result = CliRunner().invoke(app, ["sql", *args, "--db", str(tiny_warehouse)])
    assert result.exit_code == 2 and result.stderr.startswith("error: ")
    assert len(result.stderr) < 1_500, f"{len(result.stderr):,} bytes of error"
    assert "\x1b" not in result.stderr and "\x07" not in result.stderr

