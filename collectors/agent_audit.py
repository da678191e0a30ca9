"""The agent's outcomes and their audit in the lake: what happened to each GPU, one agent_audit row
per outcome. The audit is the human record; the agent decides nothing from it that a forged row
could turn against the devices (the clock locks it left are kept in its own state,
collectors.agent_locks)."""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from joulehouse.collectors.schema import AGENT_AUDIT

log = logging.getLogger(__name__)

OK_ACTIONS = frozenset({"apply", "unchanged", "dry-run", "rollback", "gone"})
# The lake's partition keys, read as the strings they are: inferred, `host=4021` became int32 and
# clashed with the files' string host column (ArrowTypeError at every apply on that host).
AUDIT_PARTITIONING = pa.schema([("date", pa.string()), ("host", pa.string())])


@dataclass(frozen=True)
class GpuOutcome:
    """What happened to one GPU. Power in W (None where it could not be read)."""

    gpu_uuid: str | None
    action: str  # apply | refuse | rollback | dry-run | verify-failed | unchanged | gone
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
    # Start of its validity window (UTC): the agent's metrics give the config's age from it.
    valid_from: dt.datetime | None = None
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
        counts = {a: self.count(a) for a in ("apply", "unchanged", "dry-run", "rollback", "refuse", "verify-failed", "gone")}
        parts = [f"{n} {a}" for a, n in counts.items() if n]
        return f"{self.host}: " + (", ".join(parts) if parts else "no GPUs in the config for this host")


class AuditNotWritten(OSError):
    """The lake's writer refused the audit of `result` (a full, read-only or vanished lake).
    `result` is then the only record of what was done to the devices, written before the audit;
    `refusal`: the ConfigError whose refusal was being audited, where it was one."""

    def __init__(self, result: ApplyResult, cause: OSError):
        if cause.errno is None:
            super().__init__(str(cause))
        else:
            super().__init__(cause.errno, cause.strerror or str(cause), cause.filename)
        self.result = result
        self.refusal: Exception | None = None


def audit(lake: str | Path | None, result: ApplyResult, now: dt.datetime) -> None:
    """One agent_audit row per outcome, written through the lake writer (no-op without a lake);
    AuditNotWritten, carrying `result`, when the writer fails."""
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
    try:
        write_dataset(lake, "agent_audit", pa.Table.from_pylist(rows, schema=AGENT_AUDIT))
    except OSError as exc:
        raise AuditNotWritten(result, exc) from exc


def read_host_audit(lake: str | Path | None, host: str, columns: list[str]) -> pa.Table | None:
    """`columns` of `host`'s agent_audit rows; None without a readable audit (none yet, or one
    that cannot be read: a damaged or foreign file is said in the log, the agent goes on)."""
    if lake is None:
        return None
    import pyarrow.dataset as ds  # only when auditing, like the writer

    from joulehouse.collectors import lakefs

    root = lakefs.join(lake, "agent_audit")
    try:
        fs = lakefs.filesystem(lake) if lakefs.is_url(lake) else None
        partitioning = ds.partitioning(AUDIT_PARTITIONING, flavor="hive")
        return ds.dataset(str(root), filesystem=fs, format="parquet", partitioning=partitioning).to_table(
            columns=columns, filter=ds.field("host") == host)
    except FileNotFoundError:
        return None
    # pyarrow's ArrowException covers a damaged file (ArrowInvalid) and one whose columns clash
    # with the others' (ArrowTypeError, not an ArrowInvalid); OSError a lake that cannot be read.
    except (OSError, pa.ArrowException) as exc:
        log.warning("agent_audit under %s cannot be read (%s: %s); going on as if it held nothing for %s",
                    root, type(exc).__name__, exc, host)
        return None
