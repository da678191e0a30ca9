"""The SM clock lock the node agent last left on each GPU, kept in the agent's own state.

NVML has no getter for locked clocks, so the agent must remember the range it set: a setting
without a lock releases a lock only where the agent knows it left one, or does not know. That
record was read back from the lake's agent_audit, which the collector's user (not root) can
write: a forged 'rollback' row, or a clock stepped back so that an older row read as the latest,
made a locked GPU read as unlocked, and the next config without a lock left the lock on for good.
So the agent keeps it in a JSON file beside its replay record (`[agent] state_path`, named
`<state>.clock-locks.json`), in the folder only the agent's user writes, written as the replay
record is (a temporary file, fsynced, renamed over the old one, the folder fsynced). The audit
stays the human record of what was done.

What the record does not vouch for is an unknown lock (an UnknownLock, whose `why` the audit
says), never "unlocked": a GPU it does not name, a file that cannot be read or is not what the
agent wrote, a file or folder another user can write, and every GPU at the agent loop's first
apply since it started, which trusts no lock recorded before it (`judged_locks`). A setting
without a lock then resets the GPU's clocks (the safe side: resetting clocks that are not locked
changes nothing). A GPU is dropped from the record (made
unknown), durably, before the agent sets a lock on it: an agent killed between the set and the
record's update leaves it unknown, not unlocked. Each update happens under `held()` with the
device work it records, so an operator's `agent apply` and the service's rollback cannot write
back a record the other has changed meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from joulehouse.collectors import lakefs
from joulehouse.collectors.agent_audit import GpuOutcome
from joulehouse.collectors.agent_replay import (
    ReplayStateError, check_private_folder, held_state_lock, read_state_text,
)

log = logging.getLogger(__name__)

# (min, max) MHz of a lock, or None: unlocked.
Lock = tuple[int, int] | None


@dataclass(frozen=True)
class UnknownLock:
    """A GPU's lock the record does not vouch for (see the module docstring); `why`, for the audit."""

    why: str


UNKNOWN_LOCK = UnknownLock("not in the agent's clock-lock record")
RECORD_NOT_TRUSTED = UnknownLock("the agent's clock-lock record is not trusted (the agent's log says why)")


def describe_lock(lock: Lock) -> str:
    return "unlocked" if lock is None else f"{lock[0]}-{lock[1]} MHz"


def judged_locks(read: Mapping[str, Lock] | None, gpu_uuids: Iterable[str], *,
                 trusted: bool) -> dict[str, Lock | UnknownLock]:
    """Each of `gpu_uuids`' lock as an apply judges it, from `read` (ClockLockRecord.read: None, a
    file not trusted). Not `trusted` (the agent loop's first apply since it started), a lock the
    record names is unknown all the same: one set outside the record (another state folder,
    nvidia-smi) is not in it, and that apply is the one that clears what a restart left behind.
    Its audit then says what the record holds and that it was not trusted, not that it is silent."""
    if read is None:
        return dict.fromkeys(gpu_uuids, RECORD_NOT_TRUSTED)
    judged: dict[str, Lock | UnknownLock] = {}
    for uuid in gpu_uuids:
        if uuid not in read:
            judged[uuid] = UNKNOWN_LOCK
        elif trusted:
            judged[uuid] = read[uuid]
        else:
            judged[uuid] = UnknownLock(f"the agent's clock-lock record says {describe_lock(read[uuid])}, but the first "
                                       "apply since the agent started takes no recorded lock on trust")
    return judged


class ClockLockRecord:
    """{gpu_uuid: the SM clock lock the agent left} in the JSON file `path`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def read(self) -> dict[str, Lock] | None:
        """{gpu_uuid: (min, max) MHz, or None for unlocked}; a GPU not in it is an unknown lock.
        Empty without a file; None (every lock unknown, said in the log) when the file there
        cannot be trusted: an update then replaces it whatever it holds."""
        try:
            check_private_folder(self.path.parent)
            text = read_state_text(self.path, owned=True)
        except FileNotFoundError:
            return {}  # nothing recorded yet (or a state folder not made yet): every lock unknown
        except (OSError, UnicodeDecodeError, ReplayStateError) as exc:
            log.warning("clock-lock record %s is not trusted (%s); every GPU's SM clock lock is read as unknown",
                        self.path, exc)
            return None
        try:
            return _parse(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            log.warning("clock-lock record %s is not the agent's (%s: %s); every GPU's SM clock lock is read as "
                        "unknown", self.path, type(exc).__name__, exc)
            return None

    def write(self, locks: Mapping[str, Lock]) -> None:
        """Replace the record with `locks`, durably; OSError when it cannot be written."""
        lakefs.makedirs_durably(self.path.parent)
        check_private_folder(self.path.parent)
        document = {"locked_sm_clocks_mhz": {uuid: None if lock is None else list(lock)
                                             for uuid, lock in sorted(locks.items())}}
        lakefs.write_file_atomically(self.path, json.dumps(document, indent=2).encode(), 0o600)

    def held(self) -> contextlib.AbstractContextManager[None]:
        """This agent alone reads and changes the record, and the devices it records, while the
        block runs (an exclusive flock on `<record>.lock`; another agent of the node waits)."""
        return held_state_lock(self.path)


def _parse(document: Any) -> dict[str, Lock]:
    locks: dict[str, Lock] = {}
    for uuid, lock in dict(document["locked_sm_clocks_mhz"]).items():
        if not isinstance(uuid, str):
            raise TypeError(f"GPU {uuid!r} is not a UUID")
        if lock is not None:
            low, high = lock
            if not (type(low) is int and type(high) is int and 0 < low <= high):
                raise ValueError(f"GPU {uuid}: {lock!r} is not a (min, max) MHz range")
            lock = (low, high)
        locks[uuid] = lock
    return locks


def before_locking(recorded: Mapping[str, Lock], wanted: Mapping[str, Lock]) -> dict[str, Lock]:
    """`recorded` without the GPUs about to be locked to another range than it says: the record to
    write before the devices are touched."""
    return {uuid: lock for uuid, lock in recorded.items() if wanted.get(uuid) in (None, lock)}


def after_outcomes(recorded: Mapping[str, Lock], outcomes: Iterable[GpuOutcome],
                   wanted: Mapping[str, Lock] | None = None) -> dict[str, Lock]:
    """The record once `outcomes` are done, from `recorded` (read before any device was touched).
    `wanted`: an apply's requested lock per GPU (None: a rollback, which unlocks). A setting applied
    holds its lock; a rollback done is unlocked; 'verify-failed' (the device's state not known) and
    'gone' are unknown; a refusal left the lock as it was."""
    locks = dict(recorded)
    for o in outcomes:
        if o.gpu_uuid is None:
            continue
        if o.action in ("apply", "unchanged", "rollback"):
            locks[o.gpu_uuid] = None if wanted is None else wanted[o.gpu_uuid]
        elif o.action in ("verify-failed", "gone"):
            locks.pop(o.gpu_uuid, None)
    return locks


def record_after(record: ClockLockRecord, written: Mapping[str, Lock] | None, now_known: Mapping[str, Lock]) -> None:
    """Write `now_known` where it differs from what the record holds (`written`; None: a file not
    trusted). A failure is said in the log, not raised: what the devices were set to stands, and
    the record it leaves is on the safe side (a GPU being locked was dropped before; one unlocked
    still reads as locked)."""
    if written is not None and dict(now_known) == dict(written):
        return
    try:
        record.write(now_known)
    except (OSError, ReplayStateError) as exc:
        log.warning("clock-lock record %s could not be updated (%s); the GPUs whose lock changed read as locked "
                    "or unknown until it is", record.path, exc)


def hold_if_possible(record: ClockLockRecord | None, stack: contextlib.ExitStack) -> ClockLockRecord | None:
    """`record`, held until `stack` closes; None (said in the log) without a record or where it
    cannot be held (its folder another user can write, the lock file not openable)."""
    if record is None:
        return None
    try:
        stack.enter_context(record.held())
    except (OSError, ReplayStateError) as exc:
        log.warning("clock-lock record %s cannot be held (%s); it is left as it is", record.path, exc)
        return None
    return record
