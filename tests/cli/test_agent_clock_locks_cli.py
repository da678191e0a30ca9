"""`joulehouse agent apply` and `agent rollback` keep the clock locks they leave in the agent's
state (collectors.agent_locks), the record the service judges from: what a one-off command did
is not misread by the next apply, the service's or the operator's."""

from __future__ import annotations

import datetime as dt

import pyarrow.dataset as ds
from typer.testing import CliRunner

from joulehouse.collectors.config_contract import dump_config, load_private_key, sign_config
from nvml_stub.fixture import GpuState, nvml_stub, nvml_stub_library  # noqa: F401

from agent_cli import app, off_a_node  # noqa: F401  (fixtures)

runner = CliRunner()
GPU = GpuState.a100(0).uuid


def config_file(tmp_path, name, lock, generated_hours_ago):
    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    now = dt.datetime.now(dt.timezone.utc)
    body = {"schema_version": 1, "generated_at": fmt(now - dt.timedelta(hours=generated_hours_ago)),
            "valid_from": fmt(now - dt.timedelta(days=1)), "valid_until": fmt(now + dt.timedelta(days=1)),
            "site": "site-a", "excluded_gpu_models": [], "hosts": {"node-01": {GPU: {
                "gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput", "power_limit_w": 300.0,
                "locked_sm_clock_min_mhz": lock and lock[0], "locked_sm_clock_max_mhz": lock and lock[1],
                "expected_saving_pct": 5.0, "expected_slowdown_pct": 1.0}}}}
    path = tmp_path / name
    path.write_bytes(dump_config(sign_config(body, load_private_key(tmp_path / "keys" / "joulehouse-ed25519.pem"))))
    return path


def _locked_by_an_apply(app, tmp_path, nvml_stub) -> tuple[list[str], list[str]]:
    """A node with one A100 that `agent apply` capped at 300 W and locked at 900-1200 MHz; returns
    the node's options and the public key's."""
    nvml_stub.write([GpuState.a100(0)])
    assert runner.invoke(app, ["keys", "generate", "--out", str(tmp_path / "keys")]).exit_code == 0
    node = ["--host", "node-01", "--lake", str(tmp_path / "lake"), "--state", str(tmp_path / "agent" / "applied.json")]
    key = ["--public-key", str(tmp_path / "keys" / "joulehouse-ed25519.pub.pem")]
    locked = config_file(tmp_path, "locked.json", (900, 1200), 2)
    assert runner.invoke(app, ["agent", "apply", str(locked), *key, *node]).exit_code == 0
    return node, key


def test_an_operators_rollback_is_recorded_so_the_next_apply_does_not_claim_to_unlock(app, tmp_path, nvml_stub):
    node, key = _locked_by_an_apply(app, tmp_path, nvml_stub)
    assert nvml_stub.read()["gpu0.locked_sm_clock_max_mhz"] == "1200"
    rolled_back = runner.invoke(app, ["agent", "rollback", *node])
    assert rolled_back.exit_code == 0, rolled_back.output
    assert nvml_stub.read()["gpu0.locked_sm_clock_max_mhz"] == "0"
    unlocked = config_file(tmp_path, "unlocked.json", None, 1)
    assert runner.invoke(app, ["agent", "apply", str(unlocked), *key, *node]).exit_code == 0
    rows = ds.dataset(tmp_path / "lake" / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()
    last = max(rows, key=lambda r: r["audited_at"])
    assert (last["action"], last["reason"]) == ("apply", "set 300.0 W"), "the GPU's clocks were not locked any more"


def test_a_rollback_is_not_refused_over_a_setting_it_never_uses(app, tmp_path, nvml_stub, monkeypatch):
    """The rollback began reading the settings to find the lock record, and exited 2 on a bad value
    of another section (a stale JOULEHOUSE_COLLECTOR__ variable in a root shell): the emergency
    undo left every GPU capped and locked (review, helper-99)."""
    node, _ = _locked_by_an_apply(app, tmp_path, nvml_stub)
    monkeypatch.setenv("JOULEHOUSE_COLLECTOR__INTERVAL_S", "0")
    rolled_back = runner.invoke(app, ["agent", "rollback", *node])
    assert rolled_back.exit_code == 0, rolled_back.output
    assert "the settings cannot be read" in rolled_back.output and "interval_s" in rolled_back.output
    state = nvml_stub.read()
    assert state["gpu0.locked_sm_clock_max_mhz"] == "0" and state["gpu0.power_limit_mw"] == "400000"  # the default
