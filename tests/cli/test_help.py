"""Every command's --help: what to type (no Python types), units, one example; one spelling of
durations (`--interval 1s`) and `joulehouse --version`."""

from __future__ import annotations

import re
from pathlib import Path
from importlib.metadata import version

import pytest
import typer
from typer.testing import CliRunner

from joulehouse.cli.main import app


def _commands(group, path=()):
    for name, command in sorted(getattr(group, "commands", {}).items()):
        if getattr(command, "commands", None):
            yield from _commands(command, (*path, name))
        else:
            yield (*path, name), command


REPO = Path(__file__).resolve().parents[2]
COMMANDS = list(_commands(typer.main.get_command(app)))


def test_every_command_is_listed():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"run", "demo", "collect", "agent apply", "agent run", "carbon estimate", "tco estimate", "caps from-sweep"} <= names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_help_shows_what_to_type_and_an_example(path):
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert not re.search(r"<(bool|int|float|str|path|list\[[^>]*\])>", text), text  # no Python types
    assert "Example: joulehouse " in text or "Example: sudo joulehouse " in text
    words = re.search(r"Example: (?:sudo )?joulehouse (.*)", text).group(1).split()
    assert words[: len(path)] == list(path), "the example runs the command itself"


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_a_commands_summary_is_one_line_so_its_group_lists_it_whole(path, command):
    """A group's listing shows the first paragraph of each command's help with its line breaks:
    `joulehouse --help` read "...; print the" / "report's path" on two lines, `agent --help`
    broke every entry mid-sentence."""
    summary = (command.help or "").strip().split("\n\n")[0]
    assert summary and "\n" not in summary, summary
    assert len(summary) <= 100, f"{len(summary)} characters: {summary}"


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_an_example_that_reads_the_shared_data_names_a_file_that_is_there(path):
    """Pasted from the repository's root, the example finds its file (`caps from-sweep` named a
    bare zeus_*.csv, which is nowhere but in ../shared/data/sweeps)."""
    text = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "200"}).stdout
    example = re.search(r"Example: (?:sudo )?joulehouse (.*)", text).group(1)
    for word in example.split():
        if re.search(r"(zeus|perseus)_.*\.csv$", word) or word.startswith("../shared/"):
            assert (REPO / word).exists(), f"{' '.join(path)}: the example's {word} is not there from the repository root"


@pytest.mark.parametrize("path, command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_durations_are_spelled_one_way(path, command):
    visible = [opt for p in command.params if not getattr(p, "hidden", False) for opt in p.opts]
    # seconds as a bare number option (--interval-s 5) is the old spelling: `--interval 5s` instead
    assert not [o for o in visible if re.fullmatch(r"--[a-z-]*interval[a-z-]*-s", o)]


def test_version():
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.stdout.strip() == f"joulehouse {version('joulehouse')}"


def test_the_signed_file_is_the_export_and_settings_are_the_config():
    apply_help = CliRunner().invoke(app, ["agent", "apply", "--help"], env={"COLUMNS": "200"}).stdout
    run_help = CliRunner().invoke(app, ["agent", "run", "--help"], env={"COLUMNS": "200"}).stdout
    assert "EXPORT" in apply_help and "The signed export" in apply_help
    assert "--export-url" in run_help and "--config " in run_help and "--config-url" not in run_help
    assert "joulehouse TOML settings" in run_help


def test_agent_run_reads_a_duration_and_names_a_bad_one(tmp_path):
    result = CliRunner().invoke(app, ["agent", "run", "--export-url", str(tmp_path / "x.json"), "--interval", "soon"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --interval 'soon': expected a number with ms, s, m or h (e.g. '1s')"


def test_collect_names_the_option_whose_duration_is_out_of_range(tmp_path):
    """An operator's trial: `--interval 1e9s` read "CollectorSettings.interval_s = 1000000000.0: ...",
    naming a class the user never typed."""
    result = CliRunner().invoke(app, ["collect", "--source", "sim", "--lake", str(tmp_path / "lake"),
                                      "--interval", "1e9s"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --interval '1e9s': input should be less than or equal to 3600 (s)"
    assert not (tmp_path / "lake").exists()


def test_the_readmes_command_table_names_every_command():
    """The README's table of commands left out the `jobs` group and `collect --source links`."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    rows = "\n".join(line for line in readme.splitlines() if line.startswith("| `joulehouse ") or line.startswith("| `sudo "))
    groups = {path[0] for path, _ in COMMANDS}
    missing = [g for g in sorted(groups) if f"joulehouse {g}" not in rows and f"`{g} " not in rows]
    assert not missing, f"the README's command table lacks {missing}"
    collect = next(command for path, command in COMMANDS if path == ("collect",))
    source = next(p for p in collect.params if p.name == "source")
    for name in re.findall(r"[a-z]+", source.help.split("(")[0]):
        if name not in ("or",):
            assert f"\\|{name}" in rows or f"source {name}" in rows, f"--source {name} is not in the README's table"
