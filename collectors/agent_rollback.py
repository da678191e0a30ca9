"""The node agent's rollback: GPUs back to their device default power limit
(nvmlDeviceGetPowerManagementDefaultLimit) with their SM clocks unlocked, for an expired, revoked
or dropped setting (collectors.agent_loop) or the operator (`joulehouse agent rollback`).

Each reset is tried on its own (the limit, the clock unlock) and every GPU's audit row says what
was done to the device and what failed, with NVML's reason:
- 'rollback': back at the default limit, clocks unlocked ('unchanged' where the limit already was);
- 'verify-failed': the limit was set to the default (its before/after W in the row) but the GPU
  did not end at its defaults: the clock unlock failed, or the limit reads back otherwise or not at all;
- 'refuse': the limit was not changed: its reset failed, or the GPU could not be read;
- 'gone': a GPU named (a setting in force, a rollback owed) is not on the host while every GPU
  there reads: removed or replaced. Nothing holds its setting (a board back on the bus after a
  reset starts at its default), so nothing is owed; owed, it was tried and audited 'refuse' at
  every poll for good.
A GPU that cannot be read (lost, off the bus) still gets a row: by UUID where the caller names it
(`gpu_uuids`, or `expected`: the GPUs known to hold a setting), else one per unreadable GPU index
(gpu_uuid NULL). Every outcome outside OK_ACTIONS is a rollback still owed: the agent loop tries
it again at its next poll.

Given the agent's clock-lock record (collectors.agent_locks), the rollback holds it while it works
and records the GPUs it unlocked. A record it cannot hold is said in the log and left as it is:
a rollback only unlocks, so the record it leaves errs on the safe side, and a rollback is never
refused for it.
The limits it is about to reset are kept beside that record until its audit is written
(collectors.agent_journal): the rows of a rollback killed before its audit are written by the
next apply or rollback; one that cannot be kept is said in the log, the rollback goes on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
from pathlib import Path
from typing import Any, Iterable

from joulehouse.collectors.sources.host_names import canonical_host
from joulehouse.collectors.agent_audit import ApplyResult, GpuOutcome, audit, read_host_audit
from joulehouse.collectors.agent_journal import LimitJournal
from joulehouse.collectors.agent_locks import ClockLockRecord, after_outcomes, hold_if_possible, record_after
from joulehouse.collectors.agent_nvml import gpus_by_uuid, nvml_error_text, unlock_clocks, watts_from_mw, with_nvml


def _rollback_one(nvml: Any, uuid: str, handle: Any, reason: str) -> GpuOutcome:
    try:
        before_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
        default_mw = nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle)
    except nvml.NVMLError as exc:
        return GpuOutcome(uuid, "refuse", f"rollback failed: cannot read the device's power limits "
                          f"({nvml_error_text(nvml, exc)}); nothing changed ({reason})")
    default_w = default_mw / 1000
    steps: list[str] = []  # what was done and what failed, in order, for the reason
    failed = False  # some step did not go through
    limit_set = False
    if before_mw != default_mw:
        try:
            nvml.nvmlDeviceSetPowerManagementLimit(handle, default_mw)
            limit_set = True
            steps.append(f"limit set to the device default {default_w:.1f} W (was {before_mw / 1000:.1f} W)")
        except nvml.NVMLError as exc:
            steps.append(f"setting the limit to the device default {default_w:.1f} W failed "
                         f"({nvml_error_text(nvml, exc)})")
            failed = True
    try:
        unlock_clocks(nvml, handle)
        steps.append("SM clocks unlocked")
    except nvml.NVMLError as exc:
        steps.append(f"unlocking the SM clocks failed ({nvml_error_text(nvml, exc)})")
        failed = True
    try:
        after_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
    except nvml.NVMLError as exc:
        after_mw = None
        steps.append(f"the limit cannot be read back ({nvml_error_text(nvml, exc)})")
        failed = True
    if after_mw is not None and after_mw != default_mw and (limit_set or before_mw == default_mw):
        steps.append(f"the limit reads back {after_mw} mW, not the default {default_mw} mW")
        failed = True
    watts = dict(power_limit_w_before=watts_from_mw(before_mw), power_limit_w_requested=watts_from_mw(default_mw),
                 power_limit_w_after=watts_from_mw(after_mw))
    if failed:
        # The limit is what the lake reads as a setting: changed, the row is a 'verify-failed'
        # carrying its watts; unchanged, a 'refuse'. Either way a rollback still owed.
        action, head = ("verify-failed", "rollback incomplete") if limit_set else ("refuse", "rollback failed")
        return GpuOutcome(uuid, action, f"{head}: {'; '.join(steps)} ({reason})", **watts)
    if before_mw == default_mw:
        return GpuOutcome(uuid, "unchanged", f"already at the device default ({reason}); clocks unlocked", **watts)
    return GpuOutcome(uuid, "rollback", f"back to the device default {default_w:.1f} W ({reason})", **watts)


def rollback(
    *, host: str | None = None, nvml: Any = None, lake: str | Path | None = None, now: dt.datetime | None = None,
    reason: str = "config expired or revoked", gpu_uuids: list[str] | None = None, config_sha256: str | None = None,
    keep: frozenset[str] = frozenset(), expected: Iterable[str] = (), clock_locks: ClockLockRecord | None = None,
) -> ApplyResult:
    """Return GPUs (all of this node's but those in `keep`, or `gpu_uuids`) to their default power
    limit and unlock their SM clocks; every GPU's outcome audited (see the module's docstring).
    `expected`: GPUs known to hold a setting (the config in force's, rollbacks owed), covered by a
    rollback of all GPUs even where the driver cannot read them, so that each gets its failed row.
    `clock_locks`: the agent's record of the locks it left, updated with what was unlocked."""
    host = canonical_host(host or socket.gethostname())  # as the lake and the config name it
    now = now or dt.datetime.now(dt.timezone.utc)

    def work(n: Any) -> list[GpuOutcome]:
        unreadable: list[str] = []
        handles = gpus_by_uuid(n, unreadable)
        if gpu_uuids is None:
            wanted = sorted(set(handles) - keep | _named_missing(handles, unreadable, expected, keep, lake, host))
        else:
            wanted = list(gpu_uuids)
        if journal is not None:  # back to the default: (None, unlocked)
            journal.begin(n, handles, {u: (None, None) for u in wanted if u in handles})
        lost = f" (unreadable: {'; '.join(unreadable)})" if unreadable else ""
        outcomes = [
            _rollback_one(n, u, handles[u], reason) if u in handles
            else GpuOutcome(u, "refuse", f"rollback failed: no readable GPU with UUID {u} on this host{lost}; "
                            f"its limit was not reset ({reason})") if unreadable
            else GpuOutcome(u, "gone", f"no GPU with UUID {u} on this host, and every GPU here reads: removed or "
                            f"replaced, nothing to reset ({reason})")
            for u in wanted
        ]
        # An unreadable GPU no missing UUID accounts for still gets its row, by index: a rollback
        # of every GPU cannot tell whether it holds a setting.
        if gpu_uuids is None and len(unreadable) > sum(u not in handles for u in wanted):
            outcomes += [GpuOutcome(None, "refuse", f"rollback failed: {what}; its limit was not reset ({reason})")
                         for what in unreadable]
        return outcomes

    # the limits about to be reset, kept until their audit is written (collectors.agent_journal)
    journal = None if clock_locks is None else LimitJournal(
        clock_locks.path, lake=lake, host=host, config_sha256=config_sha256, at=now, action="rollback", required=False)
    with journal if journal is not None else contextlib.nullcontext():
        with contextlib.ExitStack() as held:
            record = hold_if_possible(clock_locks, held)
            recorded = None if record is None else record.read()
            result = ApplyResult(host, config_sha256, False, with_nvml(nvml, work))
            if record is not None:
                record_after(record, recorded, after_outcomes(recorded or {}, result.outcomes))
        audit(lake, result, now)
    return result


def _named_missing(handles: dict[str, Any], unreadable: list[str], expected: Iterable[str], keep: frozenset[str],
                   lake: str | Path | None, host: str) -> set[str]:
    """GPUs a rollback of every GPU must cover that the driver did not list readable: `expected`,
    and where some GPU could not be read, those this host's audit names (the agent set them before),
    when they are no more than the unreadable GPUs (more: one since removed may be among them)."""
    missing = set(expected) - set(handles) - keep
    if unreadable:
        audited = _audited_gpus(lake, host) - set(handles) - keep - missing
        if len(missing) + len(audited) <= len(unreadable):
            missing |= audited
    return missing


def _audited_gpus(lake: str | Path | None, host: str) -> set[str]:
    """The GPUs of `host` its agent_audit names (empty without a readable audit)."""
    table = read_host_audit(lake, host, ["gpu_uuid"])
    if table is None:
        return set()
    return {u for u in table.column("gpu_uuid").to_pylist() if u}
