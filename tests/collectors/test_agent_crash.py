"""The node agent killed part-way (SIGKILL, OOM kill, power cut) and started again.

Each test runs the agent in a child process against the stand-in NVML (its GPUs' state lives in
a file, so what the child set survives it), kills it with os._exit(137) at one step of an apply,
rollback or revocation, then starts the agent again here and checks the GPUs, the agent_audit
and the agent's own state.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pynvml
import pytest

from joulehouse.collectors.agent import apply_config, rollback
from joulehouse.collectors.agent_locks import ClockLockRecord
from joulehouse.collectors.agent_loop import AgentState, poll_once
from joulehouse.collectors.agent_replay import ReplayGuard
from joulehouse.collectors.config_contract import dump_config, sign_config
from joulehouse.collectors.signing_keys import generate_keypair, load_private_key, load_public_key
from nvml_stub.fixture import GpuState

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)
HOST = "node-01"
DEFAULT_W, CAP_W = 400.0, 300.0  # the A100's default limit, and the config's cap

# The agent in a child process; argv[1] names what it does and where it is killed:
#   crash_at: "limit-set" (os._exit right after the n-th nvmlDeviceSetPowerManagementLimit the
#   device took), "apply-audit" / "rollback-audit" (after every device call, before the audit
#   row), "after-rollback-audit" (its rows written), "after-revocation-rollback" / "after-withdraw" (a revocation's rollback, or its mark of
#   the config as withdrawn, done).
CHILD = r"""
import datetime as dt, json, os, sys
import pynvml
from joulehouse.collectors import agent, agent_loop, agent_rollback
from joulehouse.collectors.agent_locks import ClockLockRecord
from joulehouse.collectors.agent_loop import AgentState, poll_once
from joulehouse.collectors.agent_replay import ReplayGuard
from joulehouse.collectors.signing_keys import load_public_key

spec = json.loads(sys.argv[1])

def killed(*args, **kwargs):
    os._exit(137)

crash_at, sets_done = spec["crash_at"], []
if crash_at == "limit-set":
    real_set = pynvml.nvmlDeviceSetPowerManagementLimit
    def set_then_die(handle, limit_mw):
        real_set(handle, limit_mw)
        sets_done.append(limit_mw)
        if len(sets_done) == spec["crash_after_sets"]:
            os._exit(137)
    pynvml.nvmlDeviceSetPowerManagementLimit = set_then_die
elif crash_at == "apply-audit":
    agent.audit = killed
elif crash_at == "rollback-audit":
    agent_rollback.audit = killed
elif crash_at == "after-rollback-audit":
    real_audit = agent_rollback.audit
    def audit_then_die(*args):
        real_audit(*args)
        os._exit(137)
    agent_rollback.audit = audit_then_die
elif crash_at == "after-revocation-rollback":
    real_rollback = agent_loop.rollback
    def rollback_then_die(**kwargs):
        result = real_rollback(**kwargs)
        if kwargs["reason"].startswith("config revoked"):
            os._exit(137)
        return result
    agent_loop.rollback = rollback_then_die
elif crash_at == "after-withdraw":
    real_withdraw = ReplayGuard.withdraw
    def withdraw_then_die(self, *args):
        real_withdraw(self, *args)
        os._exit(137)
    ReplayGuard.withdraw = withdraw_then_die

guard = ReplayGuard(spec["state"])
key = load_public_key(spec["public_key"])
if spec["do"] == "rollback":
    agent_rollback.rollback(host=spec["host"], nvml=pynvml, lake=spec["lake"], reason="rolled back by the operator",
             clock_locks=ClockLockRecord(guard.clock_locks_path))
else:  # the agent service's loop: a poll, the location removed (revoked), a poll...
    state = AgentState()
    for step in spec["polls"]:
        if step.get("revoke"):
            os.unlink(spec["location"])
        poll_once(state, spec["location"], public_key=key, host=spec["host"], nvml=pynvml, lake=spec["lake"],
                  now=dt.datetime.fromisoformat(step["now"]), replay_guard=guard)
sys.exit(0)  # not killed: the test asked for a step the agent never reached
"""


@pytest.fixture(scope="module")
def key_files(tmp_path_factory):
    """(private key, public key path): the child reads the public key from its file."""
    private_path, public_path = generate_keypair(tmp_path_factory.mktemp("crash-keys"))
    return load_private_key(private_path), public_path


def uuid(i):
    return GpuState.a100(i).uuid


def signed(private, watts, n_gpus):
    body = {"schema_version": 1, "generated_at": "2026-01-03T06:00:00Z", "valid_from": "2026-01-03T06:00:00Z",
            "valid_until": "2026-01-05T06:00:00Z", "site": "site-a", "day": "2026-01-02",
            "hosts": {HOST: {uuid(i): {"gpu_model": "NVIDIA A100-SXM4-80GB", "workload_class": "throughput",
                                       "power_limit_w": watts, "locked_sm_clock_min_mhz": None,
                                       "locked_sm_clock_max_mhz": None, "expected_saving_pct": 10.0,
                                       "expected_slowdown_pct": 5.0} for i in range(n_gpus)}},
            "excluded_gpu_models": []}
    return dump_config(sign_config(body, private))


def limits_w(stub, n_gpus):
    state = stub.read()
    return [int(state[f"gpu{i}.power_limit_mw"]) / 1000 for i in range(n_gpus)]


def audit_rows(lake):
    if not (lake / "agent_audit").exists():
        return []
    rows = ds.dataset(lake / "agent_audit", format="parquet", partitioning="hive").to_table().to_pylist()
    return sorted(rows, key=lambda r: (r["audited_at"], r["gpu_uuid"] or ""))


def changes_of(rows, gpu):
    """(action, W before, W after) of each audit row of `gpu` that changed its limit."""
    return [(r["action"], r["power_limit_w_before"], r["power_limit_w_after"]) for r in rows
            if r["gpu_uuid"] == gpu and r["power_limit_w_before"] != r["power_limit_w_after"]]


def run_killed(stub, spec):
    """Run the agent child with `spec` and check that it died where it was told to."""
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(spec)],
                          env=stub.env({**os.environ, "PYTHONPATH": str(REPO)}), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 137, f"the agent was not killed at {spec['crash_at']}: {done.stderr}"


@pytest.fixture()
def node(nvml_stub, key_files, lake, tmp_path):
    """Four A100s at their 400 W default, the config location and the agent's state files."""
    nvml_stub.write([GpuState.a100(i) for i in range(4)])
    location = tmp_path / "recommended-config.json"
    location.write_bytes(signed(key_files[0], CAP_W, 4))
    state = tmp_path / "agent-state" / "agent-applied.json"
    spec = {"host": HOST, "lake": str(lake), "location": str(location), "state": str(state),
            "public_key": str(key_files[1]), "polls": [{"now": NOW.isoformat()}], "do": "poll"}
    poll_kw = dict(public_key=load_public_key(key_files[1]), host=HOST, nvml=pynvml, lake=lake)
    return spec, location, ReplayGuard(state), poll_kw


@pytest.mark.slow  # a child process per test (about a second)
@pytest.mark.parametrize("crash", [{"crash_at": "limit-set", "crash_after_sets": 2}, {"crash_at": "apply-audit"}],
                         ids=["between-gpus", "before-the-audit"])
def test_a_cap_set_by_an_apply_killed_before_its_audit_gets_its_apply_row_at_the_next_start(
        nvml_stub, lake, node, crash):
    """Killed after capping GPUs 0 and 1 (or all four) and before its audit: no row said those GPUs
    went 400 -> 300 W. The restarted agent found them at the cap and audited them 'unchanged'
    (before = 300 W), so the lake read the cap as set outside the agent."""
    spec, location, guard, poll_kw = node
    run_killed(nvml_stub, {**spec, **crash})
    capped_by_the_killed_agent = [i for i, w in enumerate(limits_w(nvml_stub, 4)) if w == CAP_W]
    assert capped_by_the_killed_agent and audit_rows(lake) == []
    message = poll_once(AgentState(), str(location), now=NOW + dt.timedelta(minutes=5), replay_guard=guard, **poll_kw)
    assert limits_w(nvml_stub, 4) == [CAP_W] * 4, message
    rows = audit_rows(lake)
    for i in range(4):
        assert changes_of(rows, uuid(i)) == [("apply", DEFAULT_W, CAP_W)], (i, rows)
    recovered = [r for r in rows if r["gpu_uuid"] == uuid(capped_by_the_killed_agent[0]) and r["action"] == "apply"]
    assert recovered[0]["audited_at"] == NOW and "stopped before its audit" in recovered[0]["reason"]


@pytest.mark.slow
@pytest.mark.parametrize("crash", [{"crash_at": "limit-set", "crash_after_sets": 1}, {"crash_at": "rollback-audit"}],
                         ids=["between-gpus", "before-the-audit"])
def test_a_default_restored_by_a_rollback_killed_before_its_audit_gets_its_rollback_row(nvml_stub, lake, node, crash):
    """An operator's `agent rollback` killed after resetting GPU 0 (or all): no row said GPU 0 went
    back 300 -> 400 W, and the next rollback found it at its default ('unchanged'): the lake read
    the capped GPU's return to 400 W as a setting lost outside the agent."""
    spec, location, guard, poll_kw = node
    assert poll_once(AgentState(), str(location), now=NOW, replay_guard=guard, **poll_kw).startswith("applied")
    run_killed(nvml_stub, {**spec, "do": "rollback", **crash})
    assert limits_w(nvml_stub, 4)[0] == DEFAULT_W
    rollback(host=HOST, nvml=pynvml, lake=lake, reason="rolled back by the operator",
             clock_locks=ClockLockRecord(guard.clock_locks_path))
    assert limits_w(nvml_stub, 4) == [DEFAULT_W] * 4
    rows = audit_rows(lake)
    for i in range(4):
        assert changes_of(rows, uuid(i)) == [("apply", DEFAULT_W, CAP_W), ("rollback", CAP_W, DEFAULT_W)], (i, rows)


@pytest.mark.slow
def test_a_gpu_left_unchanged_by_a_killed_apply_gets_no_apply_row(nvml_stub, lake, node):
    """The journal names what the agent was about to set; a GPU the killed agent never reached is
    not audited as set (its own apply, at the next start, audits it)."""
    spec, location, guard, poll_kw = node
    run_killed(nvml_stub, {**spec, "crash_at": "limit-set", "crash_after_sets": 1})
    assert limits_w(nvml_stub, 4) == [CAP_W, DEFAULT_W, DEFAULT_W, DEFAULT_W]
    rollback(host=HOST, nvml=pynvml, lake=lake, reason="rolled back by the operator",
             clock_locks=ClockLockRecord(guard.clock_locks_path))
    rows = audit_rows(lake)
    assert changes_of(rows, uuid(0)) == [("apply", DEFAULT_W, CAP_W), ("rollback", CAP_W, DEFAULT_W)]
    assert all(changes_of(rows, uuid(i)) == [] for i in (1, 2, 3)), rows


@pytest.mark.slow
def test_a_rollback_killed_after_its_audit_is_not_audited_twice(nvml_stub, lake, node):
    """Killed after its audit rows were written (before it could say so in its own state): the
    next start must not write a second 'rollback' for the same change."""
    spec, location, guard, poll_kw = node
    apply_config(location.read_bytes(), now=NOW, replay_guard=guard, **poll_kw)
    run_killed(nvml_stub, {**spec, "do": "rollback", "crash_at": "after-rollback-audit"})
    for _ in range(2):
        rollback(host=HOST, nvml=pynvml, lake=lake, reason="rolled back by the operator",
                 clock_locks=ClockLockRecord(guard.clock_locks_path))
    rows = audit_rows(lake)
    assert [changes_of(rows, uuid(i)) for i in range(4)] == [[("apply", DEFAULT_W, CAP_W),
                                                             ("rollback", CAP_W, DEFAULT_W)]] * 4, rows


@pytest.mark.slow
@pytest.mark.parametrize("crash_at", ["after-revocation-rollback", "after-withdraw"])
def test_a_revocation_killed_part_way_does_not_let_the_config_back(nvml_stub, lake, node, crash_at):
    """The location stopped serving the config; the agent rolled the GPUs back and was killed
    before marking the config withdrawn. Restarted, with a stale mirror serving the same bytes
    again, it applied them: the revoked caps were back on every GPU."""
    spec, location, guard, poll_kw = node
    stale = location.read_bytes()
    polls = [{"now": NOW.isoformat()}, {"now": (NOW + dt.timedelta(minutes=5)).isoformat(), "revoke": True}]
    run_killed(nvml_stub, {**spec, "polls": polls, "crash_at": crash_at})
    location.write_bytes(stale)
    restarted = AgentState()
    message = poll_once(restarted, str(location), now=NOW + dt.timedelta(minutes=10), replay_guard=guard, **poll_kw)
    assert limits_w(nvml_stub, 4) == [DEFAULT_W] * 4, message
    assert "WithdrawnConfig" in message
