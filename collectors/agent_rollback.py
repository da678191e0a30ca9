"""The node agent's rollback: GPUs back to their device default power limit
(nvmlDeviceGetPowerManagementDefaultLimit) with their SM clocks unlocked, for an expired, revoked
or dropped setting (collectors.agent_loop) or the operator (`joulehouse agent rollback`). Every
GPU's outcome is audited into the lake's agent_audit.
"""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path
from typing import Any

from joulehouse.collectors.agent_audit import ApplyResult, GpuOutcome, audit
from joulehouse.collectors.agent_nvml import gpus_by_uuid, nvml_error_text, unlock_clocks, watts_from_mw, with_nvml


def _rollback_one(nvml: Any, uuid: str, handle: Any, reason: str) -> GpuOutcome:
    try:
        before_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
        default_mw = nvml.nvmlDeviceGetPowerManagementDefaultLimit(handle)
        if before_mw != default_mw:
            nvml.nvmlDeviceSetPowerManagementLimit(handle, default_mw)
        unlock_clocks(nvml, handle)
        after_mw = nvml.nvmlDeviceGetPowerManagementLimit(handle)
    except nvml.NVMLError as exc:
        return GpuOutcome(uuid, "refuse", f"rollback failed: {nvml_error_text(nvml, exc)}")
    watts = dict(power_limit_w_before=watts_from_mw(before_mw), power_limit_w_requested=watts_from_mw(default_mw),
                 power_limit_w_after=watts_from_mw(after_mw))
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
    now = now or dt.datetime.now(dt.timezone.utc)

    def work(n: Any) -> list[GpuOutcome]:
        handles = gpus_by_uuid(n)
        wanted = sorted(u for u in handles if u not in keep) if gpu_uuids is None else gpu_uuids
        return [
            _rollback_one(n, u, handles[u], reason) if u in handles
            else GpuOutcome(u, "refuse", f"no GPU with UUID {u} on this host; nothing to roll back")
            for u in wanted
        ]

    result = ApplyResult(host, config_sha256, False, with_nvml(nvml, work))
    audit(lake, result, now)
    return result
