"""The agent's audit in the lake: one agent_audit row per GPU outcome, and, read back, the SM
clock lock the agent last left on each GPU (NVML has no getter for locked clocks, so the agent's own
audit is the only record of the range it set)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa

from joulehouse.collectors.schema import AGENT_AUDIT

if TYPE_CHECKING:
    from joulehouse.collectors.agent import ApplyResult

# How the audit's reason names a lock ("SM clocks locked to 900-1200 MHz"; collectors.agent writes it).
LOCK_IN_REASON = re.compile(r"SM clocks locked to (\d+)-(\d+) MHz")


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
