"""Careless or hostile names given to the CLI: an empty one is refused, not read as "every model"
or "the default"; a huge one, or one holding newlines and ANSI escapes, comes back in the error
bounded and escaped (a 100 kB --gpu-model was echoed whole; an escape in --lake reached the
terminal as written)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
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
