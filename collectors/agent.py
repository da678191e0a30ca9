"""The node agent: apply a verified recommended config to this node's GPUs through NVML.

Safety rules (ARCHITECTURE.md, "The recommended-config file"): nothing is applied unless `verify_config` accepts the document
(signature, schema version, validity window, host). GPUs are matched by UUID. A value outside
the device's own limits (nvmlDeviceGetPowerManagementLimitConstraints, mW) is refused and
reported, never clamped; so is a locked SM clock range above the device's max clock
(nvmlDeviceGetMaxClockInfo) or below the lowest clock it lists (nvmlDeviceGetSupportedGraphicsClocks
at its highest memory clock). Every set is read back. Applying the same config twice changes nothing
(audited 'unchanged'; a lock-only change is an 'apply', the range in its reason, judged against the
lock the agent's own audit last recorded, since NVML cannot read a lock back). GPUs are
independent: when one set call fails (NO_PERMISSION on GPU 3 of 8) the others still get theirs,
and every GPU gets its own outcome and audit row. `rollback` returns GPUs to the device default
limit (nvmlDeviceGetPowerManagementDefaultLimit) and unlocks clocks, for an expired or revoked
config.

NVML is injected (`nvml=pynvml`) so tests can run the real nvidia-ml-py against a stand-in
library, or a fake module. NVML units are mW and MHz; this module's API speaks W and MHz.
"""

from __future__ import annotations

import datetime as dt
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pyarrow as pa

from joulehouse.collectors.config_contract import (
    ConfigError, GpuSetting, RecommendedConfig, body_sha256, load_config_document, verify_config,
)
from joulehouse.collectors.schema import AGENT_AUDIT

OK_ACTIONS = frozenset({"apply", "unchanged", "dry-run", "rollback"})
# How the audit's reason names a lock ("SM clocks locked to 900-1200 MHz"): NVML has no getter for
# locked clocks, so the agent's own audit is the only record of the range it left on a GPU.
LOCK_IN_REASON = re.compile(r"SM clocks locked to (\d+)-(\d+) MHz")
UNKNOWN = object()


@dataclass(frozen=True)
class GpuOutcome:
    """What happened to one GPU. Power in W (None where it could not be read)."""

    gpu_uuid: str | None
    action: str  # apply | refuse | rollback | dry-run | verify-failed | unchanged
    reason: str
    power_limit_w_before: float | None = None
    power_limit_w_requested: float | None = None
    power_limit_w_after: float | None = None


@dataclass
class ApplyResult:
    """Every GPU's outcome for one apply or rollback on one host."""

    host: str
    config_sha256: str | None
    dry_run: bool
    outcomes: list[GpuOutcome] = field(default_factory=list)
    # End of the applied config's validity window (UTC); the agent loop rolls back after it.
    valid_until: dt.datetime | None = None
    # Why NVML itself could not be used (driver not loaded, init failed): nothing was set, every
    # setting refused; None when NVML answered.
    nvml_unavailable: str | None = None

    @property
    def ok(self) -> bool:
        """True when every GPU ended as asked (applied, unchanged, rolled back or dry-run)."""
        return all(o.action in OK_ACTIONS for o in self.outcomes)

    def count(self, action: str) -> int:
        return sum(o.action == action for o in self.outcomes)

    def summary(self) -> str:
        counts = {a: self.count(a) for a in ("apply", "unchanged", "dry-run", "rollback", "refuse", "verify-failed")}
        parts = [f"{n} {a}" for a, n in counts.items() if n]
        return f"{self.host}: " + (", ".join(parts) if parts else "no GPUs in the config for this host")


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _watts(mw: int | None) -> float | None:
    return None if mw is None else mw / 1000.0


def _nvml_error(nvml: Any, exc: Exception) -> str:
    """NVML's own text for an error (e.g. 'Insufficient Permissions')."""
    try:
        return f"{type(exc).__name__}: {nvml.nvmlErrorString(exc.value)}"
    except Exception:  # noqa: BLE001 - an error string is best effort
        return f"{type(exc).__name__}: {exc}"


def _as_text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def gpus_by_uuid(nvml: Any, unreadable: list[str] | None = None) -> dict[str, Any]:
    """{uuid: NVML handle} for every GPU this node's driver sees. A GPU that cannot be read (lost,
    fallen off the bus) is left out and named in `unreadable`: the others are still served."""
    handles = {}
    for index in range(nvml.nvmlDeviceGetCount()):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            handles[_as_text(nvml.nvmlDeviceGetUUID(handle))] = handle
        except nvml.NVMLError as exc:
            if unreadable is not None:
                unreadable.append(f"GPU index {index}: {_nvml_error(nvml, exc)}")
    return handles


def _check_clocks(nvml: Any, handle: Any, s: GpuSetting) -> str | None:
    """Why a locked SM clock range cannot be set on this device, or None if it can."""
    if s.locked_sm_clock_max_mhz is None:
        return None
    try:
        top_mhz = nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)
    except nvml.NVMLError as exc:
        return f"cannot read the device's max SM clock to check {s.locked_sm_clock_max_mhz} MHz ({_nvml_error(nvml, exc)})"
    if s.locked_sm_clock_max_mhz > top_mhz:
        return f"locked SM clock max {s.locked_sm_clock_max_mhz} MHz is above the device's max {top_mhz} MHz"
    # NVML has no min-clock getter: the lowest clock the driver lists (as nvidia-smi's supported
    # clocks) at the device's highest memory clock is the floor of a lock.
    try:
        memory_mhz = max(nvml.nvmlDeviceGetSupportedMemoryClocks(handle))
        bottom_mhz = min(nvml.nvmlDeviceGetSupportedGraphicsClocks(handle, memory_mhz))
    except nvml.NVMLError as exc:
        return (f"cannot read the device's supported SM clocks to check {s.locked_sm_clock_min_mhz} MHz "
                f"({_nvml_error(nvml, exc)})")
    except ValueError:  # an empty list: the driver names no clock to lock to
        return f"the device lists no supported SM clocks to check {s.locked_sm_clock_min_mhz} MHz"
    if s.locked_sm_clock_min_mhz < bottom_mhz:
        return f"locked SM clock min {s.locked_sm_clock_min_mhz} MHz is below the device's lowest {bottom_mhz} MHz"
    return None


def audited_locks(lake: str | Path | None, host: str) -> dict[str, tuple[int, int] | None] | None:
    """{gpu_uuid: (min, max) MHz} of the SM clock lock the agent's audit says it last left on each
    GPU of `host` (None: unlocked by a rollback or never locked by an apply; a GPU not in the audit
    was never locked); None without a readable audit: every requested lock then counts as a change."""
    if lake is None:
        return None
    import pyarrow.dataset as ds  # only when auditing, like the writer

    from joulehouse.collectors import lakefs

    root = lakefs.join(lake, "agent_audit")
    try:
        fs = lakefs.filesystem(lake) if lakefs.is_url(lake) else None
        table = ds.dataset(str(root), filesystem=fs, format="parquet", partitioning="hive").to_table(
            columns=["audited_at", "gpu_uuid", "action", "reason"], filter=ds.field("host") == host)
    except (FileNotFoundError, OSError, pa.ArrowInvalid):
        return None
    locks: dict[str, tuple[int, int] | None] = {}
    for row in sorted(table.to_pylist(), key=lambda r: r["audited_at"]):
        if row["gpu_uuid"] is None or row["action"] not in ("apply", "unchanged", "rollback"):
            continue
        found = LOCK_IN_REASON.search(row["reason"] or "") if row["action"] != "rollback" else None
        locks[row["gpu_uuid"]] = (int(found[1]), int(found[2])) if found else None
    return locks


def _apply_one(nvml: Any, handle: Any, s: GpuSetting, previous_lock: Any = UNKNOWN) -> GpuOutcome:
    """Set one GPU's limit (and lock); `previous_lock` is the range audited last (None: unlocked,
    UNKNOWN: no audit), so a lock-only change is audited 'apply' and a repeated one 'unchanged'."""
    requested_mw = int(round(s.power_limit_w * 1000))
    try:
        before_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
        min_mw, max_mw = nvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
    except nvml.NVMLError as exc:
        return GpuOutcome(s.gpu_uuid, "refuse", f"cannot read the device's power limits: {_nvml_error(nvml, exc)}",
                          power_limit_w_requested=s.power_limit_w)
    common = dict(power_limit_w_before=_watts(before_mw), power_limit_w_requested=s.power_limit_w)
    if not min_mw <= requested_mw <= max_mw:
        return GpuOutcome(s.gpu_uuid, "refuse", f"requested {s.power_limit_w:.1f} W is outside the device's limits "
                          f"{min_mw / 1000:.1f}-{max_mw / 1000:.1f} W; not applied", **common)
    clock_problem = _check_clocks(nvml, handle, s)
    if clock_problem:
        return GpuOutcome(s.gpu_uuid, "refuse", clock_problem + "; not applied", **common)
    clocks = (f", SM clocks locked to {s.locked_sm_clock_min_mhz}-{s.locked_sm_clock_max_mhz} MHz"
              if s.locked_sm_clock_max_mhz is not None else "")
    # A setting without a lock releases one the agent left (or may have left: no audit says).
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
            _unlock_clocks(nvml, handle)
    except nvml.NVMLError as exc:
        reason = f"NVML refused the setting: {_nvml_error(nvml, exc)}"
        if not limit_set:
            return GpuOutcome(s.gpu_uuid, "refuse", reason, **common)
        # The limit went in, the clock lock did not: a setting is all or nothing, so put the limit
        # back (a GPU capped while its audit says "refuse" would count as untreated next day).
        try:
            nvml.nvmlDeviceSetPowerManagementLimit(handle, before_mw)
        except nvml.NVMLError as undo:
            return GpuOutcome(s.gpu_uuid, "verify-failed", f"{reason}; restoring the limit of {before_mw / 1000:.1f} W "
                              f"failed too ({_nvml_error(nvml, undo)}): the GPU is left at {s.power_limit_w:.1f} W",
                              power_limit_w_after=s.power_limit_w, **common)
        try:
            restored_w = _watts(nvml.nvmlDeviceGetPowerManagementLimit(handle))
        except nvml.NVMLError:
            restored_w = None  # restored, as far as the driver said; not read back
        return GpuOutcome(s.gpu_uuid, "refuse", f"{reason}; limit restored to {before_mw / 1000:.1f} W",
                          power_limit_w_after=restored_w, **common)
    try:
        after_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
    except nvml.NVMLError as exc:
        return GpuOutcome(s.gpu_uuid, "verify-failed", f"cannot read the limit back: {_nvml_error(nvml, exc)}", **common)
    if after_mw != requested_mw:
        return GpuOutcome(s.gpu_uuid, "verify-failed", f"set {requested_mw} mW but the device reads back {after_mw} mW",
                          power_limit_w_after=_watts(after_mw), **common)
    wanted_lock = ((s.locked_sm_clock_min_mhz, s.locked_sm_clock_max_mhz)
                   if s.locked_sm_clock_max_mhz is not None else None)
    if before_mw == requested_mw and wanted_lock is not None and previous_lock != wanted_lock:
        was = ("unknown: no audit of this GPU" if previous_lock is UNKNOWN
               else "unlocked" if previous_lock is None else f"{previous_lock[0]}-{previous_lock[1]} MHz")
        return GpuOutcome(s.gpu_uuid, "apply", f"{clocks[2:]} (was {was}); limit already at {s.power_limit_w:.1f} W",
                          power_limit_w_after=_watts(after_mw), **common)
    released = ""
    if unlock and isinstance(previous_lock, tuple):
        released = f", SM clocks unlocked (were {previous_lock[0]}-{previous_lock[1]} MHz)"
        if before_mw == requested_mw:
            return GpuOutcome(s.gpu_uuid, "apply", f"{released[2:]}; limit already at {s.power_limit_w:.1f} W",
                              power_limit_w_after=_watts(after_mw), **common)
    if before_mw == requested_mw:
        return GpuOutcome(s.gpu_uuid, "unchanged", f"already at {s.power_limit_w:.1f} W{clocks}",
                          power_limit_w_after=_watts(after_mw), **common)
    return GpuOutcome(s.gpu_uuid, "apply", f"set {s.power_limit_w:.1f} W{clocks}{released}",
                      power_limit_w_after=_watts(after_mw), **common)


def _unlock_clocks(nvml: Any, handle: Any) -> None:
    try:
        nvml.nvmlDeviceResetGpuLockedClocks(handle)
    except nvml.NVMLError_NotSupported:
        pass  # a device without clock locking has nothing to unlock


def audit(lake: str | Path | None, result: ApplyResult, now: dt.datetime) -> None:
    """One agent_audit row per outcome, written through the lake writer (no-op without a lake)."""
    if lake is None or not result.outcomes:
        return
    from joulehouse.collectors.writer import write_dataset  # the writer pulls pyarrow.parquet; only when auditing

    rows = [
        {"audited_at": now, "host": result.host, "gpu_uuid": o.gpu_uuid, "action": o.action,
         "config_sha256": result.config_sha256, "power_limit_w_before": o.power_limit_w_before,
         "power_limit_w_requested": o.power_limit_w_requested, "power_limit_w_after": o.power_limit_w_after,
         "reason": o.reason}
        for o in result.outcomes
    ]
    write_dataset(lake, "agent_audit", pa.Table.from_pylist(rows, schema=AGENT_AUDIT))


def _document(doc_or_path: str | Path | bytes | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(doc_or_path, str) and not doc_or_path.lstrip().startswith("{"):
        doc_or_path = Path(doc_or_path)
    return load_config_document(doc_or_path)


def apply_config(
    doc_or_path: str | Path | bytes | Mapping[str, Any], *, public_key: Any, host: str | None = None,
    nvml: Any = None, dry_run: bool = False, lake: str | Path | None = None, now: dt.datetime | None = None,
) -> ApplyResult:
    """Verify the config for `host` (default: this machine's name) and apply its settings.

    A config the contract refuses raises its ConfigError (after auditing one 'refuse' row with
    no GPU). Otherwise returns one outcome per GPU of the host's entries; GPUs the config names
    but the driver does not have are refused. `dry_run` verifies and reports what would be set
    without touching NVML at all."""
    host = host or socket.gethostname()
    now = now or _utc_now()
    doc: Mapping[str, Any] = {}
    try:
        doc = _document(doc_or_path)  # inside: a body that is not JSON is a refusal, audited too
        config = verify_config(doc, public_key, now, host=host)
    except ConfigError as exc:
        sha = body_sha256(doc["body"]) if isinstance(doc.get("body"), Mapping) else None
        refused = ApplyResult(host, sha, dry_run, [GpuOutcome(None, "refuse", f"{type(exc).__name__}: {exc}")])
        audit(lake, refused, now)
        raise
    result = ApplyResult(host, config.config_sha256, dry_run, valid_until=config.valid_until)
    if dry_run:
        result.outcomes = [
            GpuOutcome(s.gpu_uuid, "dry-run", "would set " + _describe(s), power_limit_w_requested=s.power_limit_w)
            for s in config.settings
        ]
    else:
        locks = audited_locks(lake, host)
        try:
            result.outcomes = _with_nvml(nvml, lambda n: _apply_all(n, config, locks))
        except Exception as exc:  # NVML itself unusable (driver not loaded, init failed): nothing was set
            if not _is_nvml_error(exc):
                raise
            result.nvml_unavailable = f"{type(exc).__name__}: {exc}"
            result.outcomes = [GpuOutcome(s.gpu_uuid, "refuse", f"NVML unavailable ({result.nvml_unavailable}); "
                                          "not applied", power_limit_w_requested=s.power_limit_w)
                               for s in config.settings]
    audit(lake, result, now)
    return result


def _is_nvml_error(exc: BaseException) -> bool:
    """An NVMLError of whichever NVML module (pynvml or a stand-in) raised it."""
    return any(cls.__name__ == "NVMLError" for cls in type(exc).__mro__)


def _describe(s: GpuSetting) -> str:
    clocks = (f", SM clocks {s.locked_sm_clock_min_mhz}-{s.locked_sm_clock_max_mhz} MHz"
              if s.locked_sm_clock_max_mhz is not None else "")
    return f"{s.power_limit_w:.1f} W{clocks} ({s.gpu_model}, {s.workload_class})"


def _with_nvml(nvml: Any, work) -> list[GpuOutcome]:
    if nvml is None:
        import pynvml as nvml  # noqa: PLW0127 - the production default, imported only when used
    nvml.nvmlInit()
    try:
        return work(nvml)
    finally:
        nvml.nvmlShutdown()


def _apply_all(nvml: Any, config: RecommendedConfig, locks: Mapping[str, Any] | None = None) -> list[GpuOutcome]:
    """Apply each setting; `locks` as audited_locks returns (None: no audit, every lock is new)."""
    unreadable: list[str] = []
    handles = gpus_by_uuid(nvml, unreadable)
    outcomes = []
    for s in config.settings:
        handle = handles.get(s.gpu_uuid)
        if handle is None:
            lost = f" (unreadable: {'; '.join(unreadable)})" if unreadable else ""
            outcomes.append(GpuOutcome(s.gpu_uuid, "refuse", f"no GPU with UUID {s.gpu_uuid} on this host{lost}; "
                                       "not applied", power_limit_w_requested=s.power_limit_w))
        else:
            outcomes.append(_apply_one(nvml, handle, s, UNKNOWN if locks is None else locks.get(s.gpu_uuid)))
    return outcomes


def _rollback_one(nvml: Any, uuid: str, handle: Any, reason: str) -> GpuOutcome:
    try:
        before_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
        default_mw = nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle)
        if before_mw != default_mw:
            nvml.nvmlDeviceSetPowerManagementLimit(handle, default_mw)
        _unlock_clocks(nvml, handle)
        after_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
    except nvml.NVMLError as exc:
        return GpuOutcome(uuid, "refuse", f"rollback failed: {_nvml_error(nvml, exc)}")
    watts = dict(power_limit_w_before=_watts(before_mw), power_limit_w_requested=_watts(default_mw),
                 power_limit_w_after=_watts(after_mw))
    if after_mw != default_mw:
        return GpuOutcome(uuid, "verify-failed", f"rollback set {default_mw} mW but reads back {after_mw} mW", **watts)
    if before_mw == default_mw:
        return GpuOutcome(uuid, "unchanged", f"already at the device default ({reason}); clocks unlocked", **watts)
    return GpuOutcome(uuid, "rollback", f"back to the device default {default_mw / 1000:.1f} W ({reason})", **watts)


def rollback(
    *, host: str | None = None, nvml: Any = None, lake: str | Path | None = None, now: dt.datetime | None = None,
    reason: str = "config expired or revoked", gpu_uuids: list[str] | None = None, config_sha256: str | None = None,
    keep: frozenset[str] = frozenset(),
) -> ApplyResult:
    """Return GPUs (all of this node's but those in `keep`, or `gpu_uuids`) to their default power
    limit and unlock their SM clocks. Audited as 'rollback' (or 'unchanged' where already at the default)."""
    host = host or socket.gethostname()
    now = now or _utc_now()

    def work(n: Any) -> list[GpuOutcome]:
        handles = gpus_by_uuid(n)
        wanted = sorted(u for u in handles if u not in keep) if gpu_uuids is None else gpu_uuids
        return [
            _rollback_one(n, u, handles[u], reason) if u in handles
            else GpuOutcome(u, "refuse", f"no GPU with UUID {u} on this host; nothing to roll back")
            for u in wanted
        ]

    result = ApplyResult(host, config_sha256, False, _with_nvml(nvml, work))
    audit(lake, result, now)
    return result
