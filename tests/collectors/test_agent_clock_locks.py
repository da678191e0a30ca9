"""The SM clock locks the agent left, judged from its own root-only record (collectors.agent_locks),
not from the lake's agent_audit, which the collector's user can write. Against the simulated
driver (collectors.sim.nvml): NVML itself cannot say whether a GPU's clocks are locked."""

from __future__ import annotations

import datetime as dt
import json
import os

import pytest

from joulehouse.collectors.agent import apply_config
from joulehouse.collectors.agent_audit import ApplyResult, GpuOutcome, audit
from joulehouse.collectors.agent_loop import AgentState, poll_once
from joulehouse.collectors.agent_replay import ReplayGuard
from joulehouse.collectors.config_contract import dump_config, sign_config
from joulehouse.collectors.sim.constants import SPECS
from joulehouse.collectors.sim.nvml import SimDevice, SimulatedNvml

NOW = dt.datetime(2026, 1, 3, 6, 0, tzinfo=dt.timezone.utc)
HOST = "node-01"
GPU = "GPU-sim-0000"
SPEC = next(s for m, s in SPECS.items() if "A100" in m)
CAP_W = SPEC.default_limit_w - 50
LOCK_MHZ = (SPEC.f_idle_mhz + 150, SPEC.f_max_mhz - 150)


def driver() -> SimulatedNvml:
    return SimulatedNvml([SimDevice(0, GPU, SPEC, int(SPEC.default_limit_w * 1000))])


def config(private, lock, generated_hour):
    """A config setting GPU 0 to CAP_W (and `lock`, or no lock), generated `generated_hour` hours
    after NOW (each a newer config for the replay guard), valid from NOW for two days."""
    fmt = lambda t: t.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    body = {"schema_version": 1, "generated_at": fmt(NOW + dt.timedelta(hours=generated_hour)),
            "valid_from": fmt(NOW), "valid_until": fmt(NOW + dt.timedelta(days=2)), "site": "site-a",
            "day": "2026-01-02", "excluded_gpu_models": [],
            "hosts": {HOST: {GPU: {"gpu_model": SPEC.nvml_name, "workload_class": "throughput",
                                   "power_limit_w": float(CAP_W), "locked_sm_clock_min_mhz": lock and lock[0],
                                   "locked_sm_clock_max_mhz": lock and lock[1],
                                   "expected_saving_pct": 10.0, "expected_slowdown_pct": 5.0}}}}
    return sign_config(body, private)


@pytest.fixture
def guard(tmp_path):
    return ReplayGuard(tmp_path / "agent-state" / "agent-applied.json")


def at(hours):
    return NOW + dt.timedelta(hours=hours)


def _within(seconds, call):
    """call()'s result, run in a daemon thread; still blocked after `seconds` fails the test."""
    import threading

    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(call()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert outcome, f"still blocked after {seconds} s"
    return outcome[0]


def test_a_fifo_for_the_replay_record_is_a_refusal_not_a_wait(keys, lake, guard):
    """The replay record was read with a plain open: a FIFO there held every apply for good."""
    from joulehouse.collectors.agent_replay import ReplayStateError

    guard.path.parent.mkdir(mode=0o700)
    os.mkfifo(guard.path)
    kw = dict(public_key=keys[1], host=HOST, nvml=driver(), lake=lake, replay_guard=guard)

    def apply():
        try:
            apply_config(config(keys[0], None, 0), now=at(1), **kw)
        except ReplayStateError as refused:
            return refused
        return None

    assert "not a regular file" in str(_within(10, apply))


def test_a_forged_rollback_row_in_the_lake_does_not_keep_a_lock_on(keys, lake, guard, tmp_path):
    """The service locked GPU 0; whoever can write the lake (the collector's user) adds a
    'rollback' row for it. The next config sets no lock: the lock stayed on for good, because
    the agent read the forged row as 'unlocked'."""
    nvml, location = driver(), tmp_path / "recommended-config.json"
    state, kw = AgentState(), dict(public_key=keys[1], host=HOST, nvml=nvml, lake=lake, replay_guard=guard)
    location.write_bytes(dump_config(config(keys[0], LOCK_MHZ, 0)))
    poll_once(state, str(location), now=at(1), **kw)
    assert nvml.locked_clocks() == {GPU: LOCK_MHZ}
    audit(lake, ApplyResult(HOST, None, False, [GpuOutcome(GPU, "rollback", "back to the device default")]), at(2))
    location.write_bytes(dump_config(config(keys[0], None, 1)))
    message = poll_once(state, str(location), now=at(3), **kw)
    assert nvml.locked_clocks() == {}, message
    assert "1 apply" in message


def test_a_clock_stepped_back_does_not_make_an_older_audit_row_hide_the_lock(keys, lake, guard):
    """The node's clock ran two hours ahead for an unlocked apply, then was set right before a
    locked one: the unlocked row read as the latest, and a later config without a lock kept the
    lock on. (An operator's `agent apply`: the record is shared with the service.)"""
    nvml = driver()
    kw = dict(public_key=keys[1], host=HOST, nvml=nvml, lake=lake, replay_guard=guard)
    apply_config(config(keys[0], None, 0), now=at(3), **kw)  # the clock two hours ahead
    apply_config(config(keys[0], LOCK_MHZ, 1), now=at(1), **kw)  # set right: an earlier row
    assert nvml.locked_clocks() == {GPU: LOCK_MHZ}
    [outcome] = apply_config(config(keys[0], None, 2), now=at(4), **kw).outcomes
    assert nvml.locked_clocks() == {}
    assert (outcome.action, outcome.reason) == (
        "apply", f"SM clocks unlocked (were {LOCK_MHZ[0]}-{LOCK_MHZ[1]} MHz); limit already at {CAP_W:.1f} W")


def _audit_reasons_at(lake, when):
    from joulehouse.collectors.agent_audit import read_host_audit

    rows = read_host_audit(lake, HOST, ["audited_at", "gpu_uuid", "action", "reason"]).to_pylist()
    return [(r["action"], r["reason"]) for r in rows if r["audited_at"] == when and r["gpu_uuid"] == GPU]


@pytest.mark.parametrize("lock_of_the_loops_config", [LOCK_MHZ, None])
def test_the_loops_first_apply_after_a_start_says_the_record_was_not_trusted_not_that_it_is_silent(
        keys, lake, guard, tmp_path, lock_of_the_loops_config):
    """An operator's `agent apply` locked GPU 0 (the record says so); a freshly started `agent run`
    applies a config. Its first apply does not trust the record (a lock set outside it would
    stay on), but the audit said the lock was "not in the agent's clock-lock record", which the
    operator could see was false. It now says what the record holds and why it was not trusted;
    the devices end as the config says."""
    nvml, location = driver(), tmp_path / "recommended-config.json"
    kw = dict(public_key=keys[1], host=HOST, nvml=nvml, lake=lake, replay_guard=guard)
    apply_config(config(keys[0], LOCK_MHZ, 0), now=at(1), **kw)
    location.write_bytes(dump_config(config(keys[0], lock_of_the_loops_config, 1)))
    poll_once(AgentState(), str(location), now=at(2), **kw)
    [(action, reason)] = _audit_reasons_at(lake, at(2))
    assert "not in the agent's clock-lock record" not in reason
    record_said = (f"the agent's clock-lock record says {LOCK_MHZ[0]}-{LOCK_MHZ[1]} MHz, but the first apply since "
                   "the agent started takes no recorded lock on trust")
    if lock_of_the_loops_config is None:
        assert nvml.locked_clocks() == {}
        assert (action, reason) == ("unchanged", f"already at {CAP_W:.1f} W, SM clocks reset to their default (a lock "
                                                 f"left before is not known: {record_said})")
    else:
        assert nvml.locked_clocks() == {GPU: LOCK_MHZ}
        assert (action, reason) == ("apply", f"SM clocks locked to {LOCK_MHZ[0]}-{LOCK_MHZ[1]} MHz (was unknown: "
                                             f"{record_said}); limit already at {CAP_W:.1f} W")


class KilledAfterLocking(BaseException):
    """The agent dies right after NVML locked the clocks (SIGKILL, OOM), before anything is written."""


def test_an_apply_killed_after_locking_leaves_the_lock_unknown_not_unlocked(keys, lake, guard):
    """An operator's one-shot `agent apply` (it trusts the record: it is not the loop's first
    apply) after one that was killed between locking and recording: the lock was read as the
    unlocked state recorded before, and stayed on."""
    nvml = driver()
    kw = dict(public_key=keys[1], host=HOST, nvml=nvml, lake=lake, replay_guard=guard)
    apply_config(config(keys[0], None, 0), now=at(1), **kw)
    real_lock = nvml.nvmlDeviceSetGpuLockedClocks

    def lock_then_die(handle, low, high):
        real_lock(handle, low, high)
        raise KilledAfterLocking

    nvml.nvmlDeviceSetGpuLockedClocks = lock_then_die
    with pytest.raises(KilledAfterLocking):
        apply_config(config(keys[0], LOCK_MHZ, 1), now=at(2), **kw)
    assert nvml.locked_clocks() == {GPU: LOCK_MHZ}
    [outcome] = apply_config(config(keys[0], None, 2), now=at(3), **kw).outcomes
    assert nvml.locked_clocks() == {}, outcome.reason
    assert ("SM clocks reset to their default (a lock left before is not known: not in the agent's clock-lock "
            "record)") in outcome.reason


@pytest.mark.parametrize("tamper", ["not json", "group-writable", "not a range", "nested past recursion",
                                    "larger than a megabyte", "a FIFO"])
def test_a_record_that_is_not_the_agents_reads_every_lock_as_unknown(keys, lake, guard, tamper):
    """A record that cannot be trusted never reads as 'unlocked': the clocks are reset."""
    from joulehouse.collectors.agent_locks import ClockLockRecord

    nvml = driver()
    kw = dict(public_key=keys[1], host=HOST, nvml=nvml, lake=lake, replay_guard=guard)
    apply_config(config(keys[0], LOCK_MHZ, 0), now=at(1), **kw)
    record = ClockLockRecord(guard.clock_locks_path)
    assert record.read() == {GPU: LOCK_MHZ}
    unlocked = json.dumps({"locked_sm_clocks_mhz": {GPU: None}})
    if tamper == "not json":
        record.path.write_text("{")
    elif tamper == "group-writable":
        record.path.write_text(unlocked)
        record.path.chmod(0o664)
    elif tamper == "nested past recursion":  # raised RecursionError out of the apply (review, helper-99)
        record.path.write_text("[" * 100_000 + "]" * 100_000)
    elif tamper == "larger than a megabyte":  # read whole before (review, helper-99)
        record.path.write_text(unlocked + " " * (1 << 20))
    elif tamper == "not a range":
        record.path.write_text(json.dumps({"locked_sm_clocks_mhz": {GPU: [LOCK_MHZ[1], LOCK_MHZ[0]]}}))
    else:  # a plain open waited on it for good, holding both of the agent's locks (review, helper-99)
        record.path.unlink()
        os.mkfifo(record.path)
    [outcome] = _within(10, lambda: apply_config(config(keys[0], None, 1), now=at(2), **kw)).outcomes
    assert nvml.locked_clocks() == {}
    assert ("SM clocks reset to their default (a lock left before is not known: the agent's clock-lock record is "
            "not trusted (the agent's log says why))") in outcome.reason
    assert record.read() == {GPU: None}, "the apply writes back a record of its own"


def test_a_rollback_records_the_gpus_it_unlocked(keys, lake, guard):
    """After an expiry's rollback the record says 'unlocked': the next locked config is an 'apply'
    from an unlocked GPU, not a repeat of the lock the record held before."""
    from joulehouse.collectors.agent_locks import ClockLockRecord

    nvml, location = driver(), guard.path.parent.parent / "recommended-config.json"
    kw = dict(public_key=keys[1], host=HOST, nvml=nvml, lake=lake, replay_guard=guard)
    state = AgentState()
    location.write_bytes(dump_config(config(keys[0], LOCK_MHZ, 0)))
    poll_once(state, str(location), now=at(1), **kw)
    assert "expired" in poll_once(state, str(location), now=at(49), **kw)
    assert nvml.locked_clocks() == {} and ClockLockRecord(guard.clock_locks_path).read() == {GPU: None}


def test_the_record_is_the_file_the_settings_name_beside_the_replay_state(guard):
    """An operator looks for (or removes) `<state stem>.clock-locks.json`, as `[agent] state_path`'s
    help says; the loop, `agent apply` and `agent rollback` all find the record there."""
    assert guard.clock_locks_path == guard.path.parent / "agent-applied.clock-locks.json"
