"""infra/placement/advice_to_scheduler.py as a site runs it (`... | sh`): it prints commands only
for a signed file inside its validity window whose host names are plain node names."""

from __future__ import annotations

import ast
import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest

from joulehouse.collectors.config_contract import canonical_body, generate_keypair, load_private_key

SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "placement" / "advice_to_scheduler.py"
VALID_FROM, VALID_UNTIL = "2026-06-12T00:00:00Z", "2026-06-14T00:00:00Z"
INSIDE = "2026-06-13T00:00:00Z"


@pytest.fixture()
def keys(tmp_path):
    return generate_keypair(tmp_path / "keys")


def signed_advice(path: Path, private_path: Path, hosts: dict | None = None) -> Path:
    body = {"kind": "joulehouse-placement-advice", "schema_version": 1, "generated_at": VALID_FROM,
            "valid_from": VALID_FROM, "valid_until": VALID_UNTIL, "site": "site-a",
            "hosts": hosts or {"node-01": {"node_preference": 50, "gpus": {"GPU-1": {"action": "normal"}}},
                               "node-02": {"node_preference": 10, "gpus": {"GPU-2": {"action": "park"}}}},
            "sites": {"site-a": {"cheapest_hours_utc": ["2026-06-13T02:00:00Z"]}}}
    signature = load_private_key(private_path).sign(canonical_body(body))
    path.write_text(json.dumps({"body": body, "signature": {"alg": "ed25519",
                                                            "value": base64.b64encode(signature).decode()}}))
    return path


def run(advice: Path, public_key: Path, *extra: str, fmt: str = "slurm") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(advice), "--public-key", str(public_key),
                           "--format", fmt, *extra], capture_output=True, text=True)


def test_an_expired_file_prints_no_command_and_exits_1(keys, tmp_path):
    """Today is after 2026-06-14: the old file would re-weight (or drain) nodes from stale advice."""
    done = run(signed_advice(tmp_path / "a.json", keys[0]), keys[1])
    assert done.returncode == 1 and not done.stdout
    assert done.stderr.strip().startswith("placement advice: expired at 2026-06-14T00:00:00Z; it is ")
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("at, ok", [
    ("2026-06-11T23:59:59Z", False), (VALID_FROM, True), ("2026-06-13T23:59:59Z", True), (VALID_UNTIL, False),
])
def test_at_checks_the_window_with_the_agents_bounds(keys, tmp_path, at, ok):
    """valid_from <= at < valid_until, as `joulehouse agent verify --at` judges a config."""
    done = run(signed_advice(tmp_path / "a.json", keys[0]), keys[1], "--at", at)
    assert (done.returncode == 0) is ok, done.stderr
    if ok:
        assert done.stdout.splitlines() == [
            "scontrol update NodeName=node-01 Weight=51",
            'scontrol update NodeName=node-02 State=DRAIN Reason="joulehouse: consolidation parks all its GPUs"']
    else:
        assert not done.stdout and ("not valid until" in done.stderr or "expired at" in done.stderr)


def test_at_needs_a_time_zone(keys, tmp_path):
    done = run(signed_advice(tmp_path / "a.json", keys[0]), keys[1], "--at", "2026-06-13T00:00:00")
    assert done.returncode == 2 and "no time zone" in done.stderr and not done.stdout


@pytest.mark.parametrize("fmt", ["slurm", "kubernetes"])
@pytest.mark.parametrize("host", ["n;rm -rf x", "$(reboot)", "-n", "node 01", "a`id`"])
def test_a_host_name_a_shell_would_interpret_refuses_the_whole_file(keys, tmp_path, fmt, host):
    hosts = {"node-01": {"node_preference": 50, "gpus": {"GPU-1": {"action": "normal"}}},
             host: {"node_preference": 50, "gpus": {"GPU-2": {"action": "normal"}}}}
    done = run(signed_advice(tmp_path / "a.json", keys[0], hosts), keys[1], "--at", INSIDE, fmt=fmt)
    assert done.returncode == 1 and not done.stdout, "not even the safe hosts' lines: the file is refused"
    assert f"host name {host!r} is not a plain node name" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("content", ["{not json", "[]", '{"body": {}}'])
def test_a_file_that_is_not_signed_advice_is_one_line_not_a_traceback(keys, tmp_path, content):
    (tmp_path / "a.json").write_text(content)
    done = run(tmp_path / "a.json", keys[1], "--at", INSIDE)
    assert done.returncode == 1 and done.stderr.startswith("placement advice: ") and "Traceback" not in done.stderr


def test_a_missing_key_file_is_one_line(keys, tmp_path):
    done = run(signed_advice(tmp_path / "a.json", keys[0]), tmp_path / "nope.pem", "--at", INSIDE)
    assert done.returncode == 1 and "cannot read the public key" in done.stderr and "Traceback" not in done.stderr


def test_the_script_needs_only_the_standard_library_and_cryptography():
    """It runs on a scheduler host where joulehouse is not installed."""
    tree = ast.parse(SCRIPT.read_text())
    roots = {(n.module if isinstance(n, ast.ImportFrom) else a.name).split(".")[0]
             for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
             for a in (n.names if isinstance(n, ast.Import) else [n])}
    assert roots - {"cryptography", "__future__"} <= set(sys.stdlib_module_names)
