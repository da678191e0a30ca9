"""Every command that reads an input file refuses what is not a regular file, and a line past its
bound, in one line (exit 2): never a traceback, never the file read whole. /dev/null stands for
the devices (/dev/zero, whose endless read filled 14 GB before): it is refused as a device without
any risk to the test machine if the check were gone."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from joulehouse.cli.main import app
from joulehouse.collectors.config_contract import generate_keypair


@pytest.fixture(scope="module")
def public_key(tmp_path_factory) -> str:
    return str(generate_keypair(tmp_path_factory.mktemp("keys"))[1])


def _refused(args: list[str], says: str) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(("error: ", "refused: ")), result.stderr
    assert says in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("args", [
    ["ingest", "nvidia-smi", "/dev/null", "--lake", "LAKE", "--host", "h1"],
    ["ingest", "slurm", "/dev/null", "--lake", "LAKE"],
    ["caps", "best-batch", "/dev/null"],
    ["caps", "from-sweep", "/dev/null"],
    ["caps", "from-sweep", "sweep.csv", "--config", "/dev/null"],
    ["agent", "verify", "config.json", "--public-key", "/dev/null"],
    ["agent", "verify", "/dev/null", "--public-key", "PUBLIC_KEY"],
    ["tco", "estimate", "--gpu-model", "H100-SXM", "--gpus", "1", "--days", "1", "--price-file", "/dev/null",
     "--start", "2026-01-01"],
    ["carbon", "estimate", "--gpu-model", "H100-SXM", "--gpus", "1", "--days", "1", "--region", "FR",
     "--start", "2026-01-01", "--grid-file", "/dev/null"],
], ids=lambda a: " ".join(a[:2]) + (" " + a[a.index("/dev/null") - 1] if a[a.index("/dev/null") - 1].startswith("--") else ""))
def test_a_device_is_refused_as_not_a_regular_file(args, tmp_path, public_key):
    args = [{"LAKE": str(tmp_path / "lake"), "PUBLIC_KEY": public_key}.get(a, a) for a in args]
    _refused(args, "/dev/null is not a regular file")


@pytest.mark.parametrize("args", [
    ["ingest", "nvidia-smi", "FILE", "--lake", "LAKE", "--host", "h1"],
    ["ingest", "slurm", "FILE", "--lake", "LAKE"],
    ["caps", "best-batch", "FILE"],
], ids=lambda a: " ".join(a[:2]))
def test_a_file_without_newlines_is_refused_at_its_first_line(args, tmp_path):
    # 2 MB in one line: past every line bound and csv's 131,072-character field (a traceback before)
    path = tmp_path / "one-line.csv"
    path.write_text("x" * 2_000_000)
    args = [{"LAKE": str(tmp_path / "lake"), "FILE": str(path)}.get(a, a) for a in args]
    _refused(args, "line 1 is longer than")


def test_an_unclosed_quote_in_an_nvidia_smi_log_is_one_line(tmp_path):
    path = tmp_path / "gpu.csv"
    path.write_text('timestamp, index, power.draw [W]\n"2026/01/02 00:00:00.000, 0, 100 W\n' + "0, 1 W\n" * 20_000)
    line = _refused(["ingest", "nvidia-smi", str(path), "--lake", str(tmp_path / "lake"), "--host", "h1"],
                    "is not CSV (field larger than field limit")
    assert ": line 187" in line  # where the open field passed csv's limit, not the end of the file


@pytest.mark.parametrize("command", [["ingest", "nvidia-smi", "--host", "h1"], ["ingest", "slurm"]])
def test_an_unknown_zone_names_the_flag_not_the_parameter(tmp_path, command):
    log = tmp_path / "log.csv"
    log.write_text("timestamp, index, power.draw [W]\n")
    _refused([*command[:2], str(log), "--lake", str(tmp_path / "lake"), *command[2:], "--assume-tz", "Mars/Olympus"],
             "--assume-tz 'Mars/Olympus' is not an IANA time zone")


def test_an_empty_standard_input_is_said_to_be_empty(tmp_path):
    result = CliRunner().invoke(app, ["sql", "-", "--db", str(tmp_path / "w.duckdb")], input="  \n")
    assert result.exit_code == 2 and "standard input held no query" in result.stderr, result.output
