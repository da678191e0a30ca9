"""The node agent: apply a verified recommended config to this node's GPUs through NVML.

Safety rules (ARCHITECTURE.md, "The recommended-config file"): nothing is applied unless `verify_config` accepts the document
(signature, schema version, validity window, host). GPUs are matched by UUID. A value outside
the device's own limits (nvmlDeviceGetPowerManagementLimitConstraints, mW) is refused and
reported, never clamped; so is a locked SM clock range above the device's max clock
(nvmlDeviceGetMaxClockInfo) or below the lowest clock it lists (nvmlDeviceGetSupportedGraphicsClocks
at its highest memory clock). Every set is read back. Applying the same config twice changes nothing
(audited 'unchanged'; a lock-only change is an 'apply', the range in its reason, judged against the
lock the agent's own record says it left, collectors.agent_locks, since NVML cannot read a lock
back). GPUs are independent: when one set call fails (NO_PERMISSION on GPU 3 of 8) the others still get theirs,
and every GPU gets its own outcome and audit row. `rollback` (collectors.agent_rollback, imported
here) returns GPUs to the device default limit and unlocks clocks, for an expired or revoked config.

NVML is injected (`nvml=pynvml`) so tests can run the real nvidia-ml-py against a stand-in
library, or a fake module. NVML units are mW and MHz; this module's API speaks W and MHz.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import socket
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from joulehouse.collectors.sources.host_names import canonical_host
from joulehouse.collectors.agent_audit import OK_ACTIONS, ApplyResult, AuditNotWritten, GpuOutcome, audit
from joulehouse.collectors.agent_journal import LimitJournal
from joulehouse.collectors.agent_locks import (
    UNKNOWN_LOCK, ClockLockRecord, Lock, UnknownLock, after_outcomes, before_locking, describe_lock, judged_locks,
    record_after,
)
from joulehouse.collectors.agent_nvml import (
    gpus_by_uuid, is_nvml_error, nvml_error_text, unlock_clocks, watts_from_mw, with_nvml,
)
from joulehouse.collectors.agent_replay import ReplayGuard
from joulehouse.collectors.agent_rollback import rollback  # noqa: F401 - imported from here (cli.agent, the loop)
from joulehouse.collectors.config_contract import (
    ConfigError, GpuSetting, RecommendedConfig, body_sha256, format_utc, load_config_document, verify_config,
)

UNKNOWN = UNKNOWN_LOCK  # the agent's record does not say which lock the GPU holds

# Without NVML a dry run cannot ask the device for its limits, and the node may not read the GPU
# catalogue (models/ is the analytics side). So it refuses what no GPU takes: the catalogue's GPUs
# take 40-700 W and clock to at most 3105 MHz; these bounds leave room for GPUs to come and still
# catch a unit slip (mW for W, Hz for MHz) before a real apply meets it.
PLAUSIBLE_POWER_LIMIT_W = (1.0, 2000.0)
PLAUSIBLE_SM_CLOCK_MHZ = (1, 5000)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def format_watts(watts: float) -> str:
    """Watts to one decimal, or as many as the value needs: 0.001 W must not read '0.0 W'."""
    short = f"{watts:.1f}"
    return short if float(short) == watts else f"{watts:.12g}"


def implausible_setting(s: GpuSetting) -> str | None:
    """Why no GPU could take `s` (see PLAUSIBLE_POWER_LIMIT_W), or None: the check a dry run
    without NVML can make."""
    low_w, high_w = PLAUSIBLE_POWER_LIMIT_W
    if not low_w <= s.power_limit_w <= high_w:
        return f"requested {format_watts(s.power_limit_w)} W is outside what any GPU takes ({low_w:g}-{high_w:g} W)"
    low_mhz, high_mhz = PLAUSIBLE_SM_CLOCK_MHZ
    if s.locked_sm_clock_max_mhz is not None and not (
            low_mhz <= s.locked_sm_clock_min_mhz and s.locked_sm_clock_max_mhz <= high_mhz):
        return (f"locked SM clocks {s.locked_sm_clock_min_mhz}-{s.locked_sm_clock_max_mhz} MHz are outside what any "
                f"GPU runs ({low_mhz}-{high_mhz} MHz)")
    return None


def _check_clocks(nvml: Any, handle: Any, s: GpuSetting) -> str | None:
    """Why a locked SM clock range cannot be set on this device, or None if it can."""
    if s.locked_sm_clock_max_mhz is None:
        return None
    try:
        top_mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
    except nvml.NVMLError as exc:
        return (f"cannot read the device's max SM clock to check {s.locked_sm_clock_max_mhz} MHz "
                f"({nvml_error_text(nvml, exc)})")
    if s.locked_sm_clock_max_mhz > top_mhz:
        return f"locked SM clock max {s.locked_sm_clock_max_mhz} MHz is above the device's max {top_mhz} MHz"
    # NVML has no min-clock getter: the lowest clock the driver lists (as nvidia-smi's supported
    # clocks) at the device's highest memory clock is the floor of a lock.
    try:
        memory_mhz = max(nvml.nvmlDeviceGetSupportedMemoryClocks(handle))
        bottom_mhz = min(nvml.nvmlDeviceGetSupportedGraphicsClocks(handle, memory_mhz))
    except nvml.NVMLError as exc:
        return (f"cannot read the device's supported SM clocks to check {s.locked_sm_clock_min_mhz} MHz "
                f"({nvml_error_text(nvml, exc)})")
    except ValueError:  # an empty list: the driver names no clock to lock to
        return f"the device lists no supported SM clocks to check {s.locked_sm_clock_min_mhz} MHz"
    if s.locked_sm_clock_min_mhz < bottom_mhz:
        return f"locked SM clock min {s.locked_sm_clock_min_mhz} MHz is below the device's lowest {bottom_mhz} MHz"
    return None


def _device_check(nvml: Any, handle: Any, s: GpuSetting) -> tuple[GpuOutcome | None, int | None]:
    """(the refusal, None) when the device cannot take `s` (limit outside its own min/max, clocks
    outside its range, limits unreadable); else (None, its power limit now in mW). Reads only."""
    requested_mw = int(round(s.power_limit_w * 1000))
    try:
        before_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
        min_mw, max_mw = nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
    except nvml.NVMLError as exc:
        return GpuOutcome(s.gpu_uuid, "refuse", f"cannot read the device's power limits: {nvml_error_text(nvml, exc)}",
                          power_limit_w_requested=s.power_limit_w), None
    common = dict(power_limit_w_before=watts_from_mw(before_mw), power_limit_w_requested=s.power_limit_w)
    if not min_mw <= requested_mw <= max_mw:
        return GpuOutcome(s.gpu_uuid, "refuse", f"requested {format_watts(s.power_limit_w)} W is outside the device's limits "
                          f"{min_mw / 1000:.1f}-{max_mw / 1000:.1f} W", **common), None
    clock_problem = _check_clocks(nvml, handle, s)
    if clock_problem:
        return GpuOutcome(s.gpu_uuid, "refuse", clock_problem, **common), None
    return None, before_mw


def _dry_run_one(nvml: Any, handle: Any, s: GpuSetting) -> GpuOutcome:
    """What applying `s` would do, from the device's own limits; nothing is set."""
    refusal, before_mw = _device_check(nvml, handle, s)
    if refusal is not None:
        return replace(refusal, reason=refusal.reason + "; an apply would refuse it")
    return GpuOutcome(s.gpu_uuid, "dry-run", f"would set {_describe(s)}; the device is at {before_mw / 1000:.1f} W",
                      power_limit_w_before=watts_from_mw(before_mw), power_limit_w_requested=s.power_limit_w)


def _apply_one(nvml: Any, handle: Any, s: GpuSetting, previous_lock: Any = UNKNOWN) -> GpuOutcome:
    """Set one GPU's limit (and lock); `previous_lock` is the range the agent's record says it left
    (None: unlocked, an UnknownLock: not known, and why), so a lock-only change is audited 'apply'
    and a repeated one 'unchanged'."""
    requested_mw = int(round(s.power_limit_w * 1000))
    refusal, before_mw = _device_check(nvml, handle, s)
    if refusal is not None:
        return replace(refusal, reason=refusal.reason + "; not applied")
    common = dict(power_limit_w_before=watts_from_mw(before_mw), power_limit_w_requested=s.power_limit_w)
    clocks = (f", SM clocks locked to {s.locked_sm_clock_min_mhz}-{s.locked_sm_clock_max_mhz} MHz"
              if s.locked_sm_clock_max_mhz is not None else "")
    # A setting without a lock releases one the agent left (or may have left: its record does not say).
    unlock = s.locked_sm_clock_max_mhz is None and previous_lock is not None
    limit_set = False
    try:
        if before_mw != requested_mw:
            nvml.nvmlDeviceSetPowerManagementLimit(handle, requested_mw)
            limit_set = True
        if s.locked_sm_clock_max_mhz is not None:
            # No NVML getter for locked clocks: setting the same range again is a no-op on the device.
            nvml.nvmlDeviceSetGpuLockedClocks(handle, s.locked_sm_clock_min_mhz, s.locked_sm_clock_max_mhz)
        elif unlock:
            unlock_clocks(nvml, handle)
    except nvml.NVMLError as exc:
        reason = f"NVML refused the setting: {nvml_error_text(nvml, exc)}"
        if not limit_set:
            return GpuOutcome(s.gpu_uuid, "refuse", reason, **common)
        # The limit went in, the clock lock did not: a setting is all or nothing, so put the limit
        # back (a GPU capped while its audit says "refuse" would count as untreated next day).
        try:
            nvml.nvmlDeviceSetPowerManagementLimit(handle, before_mw)
        except nvml.NVMLError as undo:
            return GpuOutcome(s.gpu_uuid, "verify-failed", f"{reason}; restoring the limit of {before_mw / 1000:.1f} W "
                              f"failed too ({nvml_error_text(nvml, undo)}): the GPU is left at {s.power_limit_w:.1f} W",
                              power_limit_w_after=s.power_limit_w, **common)
        try:
            restored_w = watts_from_mw(nvml.nvmlDeviceGetPowerManagementLimit(handle))
        except nvml.NVMLError:
            restored_w = None  # restored, as far as the driver said; not read back
        return GpuOutcome(s.gpu_uuid, "refuse", f"{reason}; limit restored to {before_mw / 1000:.1f} W",
                          power_limit_w_after=restored_w, **common)
    try:
        after_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
    except nvml.NVMLError as exc:
        return _undo(nvml, handle, s, before_mw, previous_lock, common,
                     f"cannot read the limit back: {nvml_error_text(nvml, exc)}")
    if after_mw != requested_mw:
        return _undo(nvml, handle, s, before_mw, previous_lock, common,
                     f"set {requested_mw} mW but the device reads back {after_mw} mW")
    wanted_lock = _lock_of(s)
    if before_mw == requested_mw and wanted_lock is not None and previous_lock != wanted_lock:
        was = (f"unknown: {previous_lock.why}" if isinstance(previous_lock, UnknownLock)
               else describe_lock(previous_lock))
        return GpuOutcome(s.gpu_uuid, "apply", f"{clocks[2:]} (was {was}); limit already at {s.power_limit_w:.1f} W",
                          power_limit_w_after=watts_from_mw(after_mw), **common)
    released = ""
    if unlock and isinstance(previous_lock, tuple):
        released = f", SM clocks unlocked (were {previous_lock[0]}-{previous_lock[1]} MHz)"
        if before_mw == requested_mw:
            return GpuOutcome(s.gpu_uuid, "apply", f"{released[2:]}; limit already at {s.power_limit_w:.1f} W",
                              power_limit_w_after=watts_from_mw(after_mw), **common)
    elif unlock:
        released = f", SM clocks reset to their default (a lock left before is not known: {previous_lock.why})"
    if before_mw == requested_mw:
        return GpuOutcome(s.gpu_uuid, "unchanged", f"already at {s.power_limit_w:.1f} W{clocks}{released}",
                          power_limit_w_after=watts_from_mw(after_mw), **common)
    return GpuOutcome(s.gpu_uuid, "apply", f"set {s.power_limit_w:.1f} W{clocks}{released}",
                      power_limit_w_after=watts_from_mw(after_mw), **common)


def _undo(nvml: Any, handle: Any, s: GpuSetting, before_mw: int, previous_lock: Any, common: dict,
          reason: str) -> GpuOutcome:
    """A setting whose limit did not read back as set is undone, as one whose clock lock failed
    is: the limit back to `before_mw` and the clocks as the agent's record says it left them
    (unlocked where it does not say). Left in place, a GPU audited 'verify-failed' stayed capped
    and locked, in force for no config, so no later config released it. 'refuse' once undone; 'verify-failed' (the
    device's state unknown, which the loop then rolls back) where the undo fails too."""
    try:
        nvml.nvmlDeviceSetPowerManagementLimit(handle, before_mw)
        if isinstance(previous_lock, tuple):  # the lock the record says was held, released or replaced above
            nvml.nvmlDeviceSetGpuLockedClocks(handle, *previous_lock)
        elif s.locked_sm_clock_max_mhz is not None or previous_lock is not None:
            unlock_clocks(nvml, handle)
        restored_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
    except nvml.NVMLError as exc:
        return GpuOutcome(s.gpu_uuid, "verify-failed", f"{reason}; undoing it failed ({nvml_error_text(nvml, exc)}): "
                          "the GPU's limit and clocks are not known", **common)
    if restored_mw != before_mw:
        return GpuOutcome(s.gpu_uuid, "verify-failed", f"{reason}; undoing it left {restored_mw} mW, not the "
                          f"{before_mw} mW before", power_limit_w_after=watts_from_mw(restored_mw), **common)
    return GpuOutcome(s.gpu_uuid, "refuse", f"{reason}; undone: limit restored to {before_mw / 1000:.1f} W",
                      power_limit_w_after=watts_from_mw(restored_mw), **common)


def _document(doc_or_path: str | Path | bytes | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(doc_or_path, str) and not doc_or_path.lstrip().startswith("{"):
        doc_or_path = Path(doc_or_path)
    return load_config_document(doc_or_path)


def _sha_or_none(doc: Mapping[str, Any]) -> str | None:
    """The refused body's hash for its audit row, or None where the body has none (not an object,
    or a value JSON cannot write, as 1e400 read as infinity: hashing it raised inside the refusal,
    and the audit row was never written)."""
    if not isinstance(doc.get("body"), Mapping):
        return None
    try:
        return body_sha256(doc["body"])
    except ConfigError:
        return None


def apply_config(
    doc_or_path: str | Path | bytes | Mapping[str, Any], *, public_key: Any, host: str | None = None,
    nvml: Any = None, dry_run: bool = False, lake: str | Path | None = None, now: dt.datetime | None = None,
    replay_guard: ReplayGuard | None = None, audited_at: dt.datetime | None = None, host_may_be_absent: bool = False,
    trust_recorded_locks: bool = True,
) -> ApplyResult:
    """Verify the config for `host` (default: this machine's name) and apply its settings.

    A config the contract refuses raises its ConfigError (after auditing one 'refuse' row with
    no GPU); so does one older than the newest `replay_guard` accepted for its site (ReplayedConfig),
    which records the config before it is applied, holding the guard (ReplayGuard.held) from its
    check to its audit, so two agents of one node apply one after the other. Otherwise returns one
    outcome per GPU of the host's entries; GPUs the config names but the driver does not have are
    refused. `dry_run` verifies and, given `nvml`, checks every setting against its device as an
    apply would (reads only: an apply's refusals are refusals here too); without `nvml` it touches
    no device.
    `audited_at`: when the audit says this happened, if not `now` (a dry run judged at another
    time, `agent apply --dry-run --at`: its rows then say the time it was judged at).
    `host_may_be_absent`: a config without entries for the host applies no setting instead of
    being refused (config_contract.verify_config).
    The clock locks the settings leave are kept beside the replay guard's state
    (collectors.agent_locks), and each GPU's lock is judged from there; without a guard nothing is
    kept and every lock is unknown, so a setting without a lock resets the clocks. The limits about
    to be set are kept there too until their audit is written (collectors.agent_journal): the rows
    of an apply killed before its audit are written by the next apply or rollback.
    `trust_recorded_locks`: False reads every lock as unknown all the same (the agent loop's first
    apply since it started: nothing it knew before a restart is taken on trust); its audit says
    what the record held and that it was not trusted (agent_locks.judged_locks)."""
    with replay_guard.held() if replay_guard is not None and not dry_run else contextlib.nullcontext():
        return _apply_config(doc_or_path, public_key=public_key, host=host, nvml=nvml, dry_run=dry_run, lake=lake,
                             now=now, replay_guard=replay_guard, audited_at=audited_at,
                             host_may_be_absent=host_may_be_absent, trust_recorded_locks=trust_recorded_locks)


def _apply_config(
    doc_or_path: str | Path | bytes | Mapping[str, Any], *, public_key: Any, host: str | None, nvml: Any,
    dry_run: bool, lake: str | Path | None, now: dt.datetime | None, replay_guard: ReplayGuard | None,
    audited_at: dt.datetime | None, host_may_be_absent: bool, trust_recorded_locks: bool,
) -> ApplyResult:
    host = canonical_host(host or socket.gethostname())  # as the lake and the config name it
    now = now or _utc_now()
    judged = "" if audited_at is None else f" (judged at {format_utc(now)})"
    audited_at = audited_at or now
    doc: Mapping[str, Any] = {}
    try:
        doc = _document(doc_or_path)  # inside: a body that is not JSON is a refusal, audited too
        config = verify_config(doc, public_key, now, host=host, host_may_be_absent=host_may_be_absent)
        if replay_guard is not None:
            replay_guard.check(config)
    except ConfigError as exc:
        sha = _sha_or_none(doc)
        refused = ApplyResult(host, sha, dry_run, [GpuOutcome(None, "refuse", f"{type(exc).__name__}: {exc}{judged}")])
        try:
            audit(lake, refused, audited_at)
        except AuditNotWritten as failed:
            failed.refusal = exc
            raise
        raise
    result = ApplyResult(host, config.config_sha256, dry_run, valid_until=config.valid_until,
                          valid_from=config.valid_from)
    # the limits about to be set, kept until their audit is written (collectors.agent_journal)
    journal = None if dry_run or replay_guard is None else LimitJournal(
        replay_guard.clock_locks_path, lake=lake, host=host, config_sha256=config.config_sha256, at=audited_at,
        action="apply", required=True)
    with journal if journal is not None else contextlib.nullcontext():
        if dry_run and nvml is None:
            result.outcomes = [_dry_run_without_device(s) for s in config.settings]
        else:
            if replay_guard is not None and not dry_run:
                replay_guard.record(config, now)  # before the devices: see collectors.agent_replay
            record = None if dry_run or replay_guard is None else ClockLockRecord(replay_guard.clock_locks_path)
            with record.held() if record is not None else contextlib.nullcontext():
                _set_devices(nvml, config, result, record, trust_recorded_locks, journal)
        if judged:
            result.outcomes = [replace(o, reason=f"{o.reason or ''}{judged}".lstrip()) for o in result.outcomes]
        audit(lake, result, audited_at)
    return result


def _set_devices(nvml: Any, config: RecommendedConfig, result: ApplyResult, record: ClockLockRecord | None,
                 trust_recorded_locks: bool, journal: LimitJournal | None = None) -> None:
    """`result`'s outcomes for `config` (a dry run's where `result` is one), and the clock locks
    they leave in `record` (held by the caller): a GPU about to get another lock is dropped from it
    first (collectors.agent_locks)."""
    read = {} if record is None else record.read()
    recorded = read or {}  # None: a file not trusted, every lock unknown
    wanted: dict[str, Lock] = {s.gpu_uuid: _lock_of(s) for s in config.settings}
    written = before_locking(recorded, wanted)
    if record is not None and (read is None or written != recorded):
        record.write(written)  # an OSError here: nothing was set
    locks = judged_locks(read, wanted, trusted=trust_recorded_locks)
    try:
        result.outcomes = with_nvml(nvml, lambda n: _apply_all(n, config, locks, dry_run=result.dry_run,
                                                               journal=journal))
    except Exception as exc:  # NVML itself unusable (driver not loaded, init failed): nothing was set
        if not is_nvml_error(exc):
            raise
        result.nvml_unavailable = f"{type(exc).__name__}: {exc}"
        result.outcomes = [GpuOutcome(s.gpu_uuid, "refuse", f"NVML unavailable ({result.nvml_unavailable}); "
                                      "not applied", power_limit_w_requested=s.power_limit_w)
                           for s in config.settings]
    if record is not None:
        record_after(record, written, after_outcomes(recorded, result.outcomes, wanted))


def _lock_of(s: GpuSetting) -> Lock:
    return None if s.locked_sm_clock_max_mhz is None else (s.locked_sm_clock_min_mhz, s.locked_sm_clock_max_mhz)


def _dry_run_without_device(s: GpuSetting) -> GpuOutcome:
    """What a dry run can say of `s` with no NVML: refused when no GPU could take it."""
    problem = implausible_setting(s)
    if problem is not None:
        return GpuOutcome(s.gpu_uuid, "refuse", f"{problem}; an apply would refuse it (no NVML: the device's own "
                          "limits were not checked)", power_limit_w_requested=s.power_limit_w)
    return GpuOutcome(s.gpu_uuid, "dry-run", f"would set {_describe(s)}; not checked against the device (no NVML)",
                      power_limit_w_requested=s.power_limit_w)


def _describe(s: GpuSetting) -> str:
    clocks = (f", SM clocks {s.locked_sm_clock_min_mhz}-{s.locked_sm_clock_max_mhz} MHz"
              if s.locked_sm_clock_max_mhz is not None else "")
    return f"{format_watts(s.power_limit_w)} W{clocks} ({s.gpu_model}, {s.workload_class})"


def _apply_all(nvml: Any, config: RecommendedConfig, locks: Mapping[str, Lock | UnknownLock], *,
               dry_run: bool = False, journal: LimitJournal | None = None) -> list[GpuOutcome]:
    """Apply each setting (or, `dry_run`, say what applying it would do); `locks` as
    agent_locks.judged_locks returns (a GPU it does not name: its lock is unknown); `journal`: where
    the limits about to be set are written first."""
    unreadable: list[str] = []
    handles = gpus_by_uuid(nvml, unreadable)
    if journal is not None:
        journal.begin(nvml, handles, {s.gpu_uuid: (int(round(s.power_limit_w * 1000)), _lock_of(s))
                                      for s in config.settings if s.gpu_uuid in handles and not implausible_setting(s)})
    outcomes = []
    for s in config.settings:
        handle = handles.get(s.gpu_uuid)
        problem = implausible_setting(s)
        if problem is not None:
            # before any device call: 1e306 W signed raised OverflowError at its mW conversion,
            # after the GPUs before it were set and before any audit row was written
            outcomes.append(GpuOutcome(s.gpu_uuid, "refuse", f"{problem}; " + ("an apply would refuse it" if dry_run
                                                                              else "not applied"),
                                       power_limit_w_requested=s.power_limit_w))
        elif handle is None:
            lost = f" (unreadable: {'; '.join(unreadable)})" if unreadable else ""
            outcomes.append(GpuOutcome(s.gpu_uuid, "refuse", f"no GPU with UUID {s.gpu_uuid} on this host{lost}; "
                                       "not applied", power_limit_w_requested=s.power_limit_w))
        elif dry_run:
            outcomes.append(_dry_run_one(nvml, handle, s))
        else:
            outcomes.append(_apply_one(nvml, handle, s, locks.get(s.gpu_uuid, UNKNOWN)))
    return outcomes
