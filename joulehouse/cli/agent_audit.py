"""`joulehouse agent apply` and its audit: a real apply is made only where its audit can be written,
and an audit that fails all the same (the disk filled meanwhile) says what was done to the GPUs,
never "nothing applied"."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NoReturn

from joulehouse.cli.agent_output import print_result
from joulehouse.cli.options import fail


def refuse_unaudited_apply(lake: Path | None, note: str | None, service_lake: Path) -> None:
    """A real apply is audited or not made: fail (exit 2), before any device is touched, without a
    lake this user can audit into (`note` says why: no --lake off a node, the service's lake as a
    plain user), or when its agent_audit folder cannot take a file: a probe is written, fsynced and
    removed (a full, read-only or misplaced lake). A dry run sets nothing: it runs unaudited."""
    if lake is None:
        why = (note or "no lake to audit into").removeprefix("not audited: ")
        fail(f"an apply is never made unaudited: {why}; pass --lake FOLDER (the agent service's is "
             f"{service_lake}); nothing applied", 2)
    import tempfile

    from joulehouse.collectors.lakefs import makedirs_durably

    folder = lake / "agent_audit"
    try:
        makedirs_durably(folder)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-", suffix=".tmp") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        fail(f"cannot write the audit into {folder} ({exc.strerror or exc}); pass a writable --lake; nothing applied", 2)


def fail_apply_write(exc: OSError, lake: Path | None, state: Path) -> NoReturn:
    """Exit on a write that failed during a real apply, saying what it did to the GPUs: the replay
    state, written before any device (exit 2, nothing applied); the audit of a refused config
    (exit 2, nothing applied); the audit written after the devices (exit 4, the outcome table
    printed: what was set stands, unaudited)."""
    from joulehouse.collectors.agent_audit import AuditNotWritten

    if not isinstance(exc, AuditNotWritten):
        fail(f"cannot record the config in {state} before applying it ({exc}); nothing applied", 2)
    if exc.refusal is not None:
        fail(f"{type(exc.refusal).__name__}: {exc.refusal} (its audit could not be written into {lake}: {exc})", 2,
             label="refused")
    done = exc.result
    print_result(done)
    changed = done.count("apply") + done.count("verify-failed")
    fail(f"{'GPUs changed as above' if changed else 'no GPU changed'} ({done.summary()}), but the audit could "
         f"not be written into {lake} ({exc}): the lake does not record this apply", 4)
