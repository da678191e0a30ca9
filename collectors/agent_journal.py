"""The power limits the node agent is about to set, kept in its own state until their agent_audit
rows are written, so that an agent killed in between (SIGKILL, OOM kill, power cut) does not take
the record of what it did to the GPUs with it.

The audit is written once every GPU is done. Killed before that, an apply that had capped GPUs
left no 'apply' row: its restart found them at the cap and audited them 'unchanged' (before = the
cap), and the lake read the cap as set outside the agent (models.outcome); a killed rollback's GPUs
read as settings lost outside it.

So before its first device call an apply or rollback writes one entry (a JSON file beside the
clock-lock record, collectors.agent_locks: temporary file, fsynced, renamed, the folder fsynced)
naming each GPU it is about to change, with its limit before and the limit it is setting (mW),
and holds an flock on it. Once its audit is written the entry is removed. The next apply or
rollback, before it touches a device, settles each entry whose flock it can take (its agent is
gone, or failed to audit): a GPU whose limit now reads as the one being set, and not the one
before, gets the row that agent owed, at the time that agent began; a GPU still at its limit
before was not changed and gets none (its own apply audits it). An entry whose rows are in the
lake already (killed after its audit) is removed without a second row. NVML cannot read a clock
lock back: a locked range is named in the row only where the limit set with it went in, and the
clock-lock record covers the rest.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from joulehouse.collectors import lakefs
from joulehouse.collectors.agent_audit import ApplyResult, GpuOutcome, audit, read_host_audit
from joulehouse.collectors.agent_locks import Lock
from joulehouse.collectors.agent_nvml import nvml_error_text
from joulehouse.collectors.agent_replay import ReplayStateError, check_private_folder, parse_utc, read_state_text
from joulehouse.collectors.config_contract import format_utc

log = logging.getLogger(__name__)

# (the limit about to be set in mW, or None: the device's default; the SM clock lock set with it)
Target = tuple[int | None, Lock]


class LimitJournal:
    """One apply's or rollback's entry (`action` 'apply' | 'rollback', begun at `at`, UTC),
    beside the clock-lock record `record_path`; a context manager: the entry is removed when the
    block ends without an error (its audit written), left for the next start otherwise.
    `required`: an entry that cannot be written raises (an apply: nothing is set yet) instead of
    being said in the log (a rollback is never refused for it)."""

    def __init__(self, record_path: Path, *, lake: str | Path | None, host: str, config_sha256: str | None,
                 at: dt.datetime, action: str, required: bool) -> None:
        self.folder = record_path.parent
        self.prefix = record_path.name.removesuffix(".json").removesuffix(".clock-locks") + ".audit-owed."
        self.lake, self.host, self.config_sha256, self.at = lake, host, config_sha256, at
        self.action, self.required = action, required
        self._fd: int | None = None
        self._path: Path | None = None

    def __enter__(self) -> LimitJournal:
        return self

    def __exit__(self, error_type: Any, *_: Any) -> None:
        if self._fd is None:
            return
        try:
            if error_type is None:
                self._path.unlink(missing_ok=True)
                lakefs.fsync_dir(self.folder)
        except OSError as exc:  # the rows are written: the next start finds them and writes no second
            log.warning("audit journal entry %s could not be removed (%s)", self._path, exc)
        finally:
            os.close(self._fd)  # releases the flock: the next start may settle what is left
            self._fd = None

    def begin(self, nvml: Any, handles: Mapping[str, Any], targets: Mapping[str, Target]) -> None:
        """Settle what killed agents left, then write this one's entry for the GPUs of `targets`
        whose limit differs from the one to be set (read now through `handles`)."""
        self._settle(nvml, handles)
        gpus = {}
        for uuid, (target_mw, lock) in targets.items():
            try:
                before_mw = nvml.nvmlDeviceGetPowerManagementLimit(handles[uuid])
                if target_mw is None:
                    target_mw = nvml.nvmlDeviceGetPowerManagementDefaultLimit(handles[uuid])
            except nvml.NVMLError:
                continue  # unreadable: the apply or rollback reads it too, refuses it and sets nothing
            if before_mw != target_mw:
                gpus[uuid] = {"limit_mw_before": before_mw, "limit_mw_set": target_mw,
                              "locked_sm_clocks_mhz": None if lock is None else list(lock)}
        if not gpus:
            return
        entry = {"action": self.action, "host": self.host, "config_sha256": self.config_sha256,
                 "began_at": self.at.astimezone(dt.timezone.utc).isoformat(), "gpus": gpus}
        try:
            self._write_locked(json.dumps(entry, indent=2).encode())
        except (OSError, ReplayStateError) as exc:
            if self.required:
                raise
            log.warning("audit journal beside %s cannot be written (%s); a %s killed before its audit leaves no "
                        "record of the GPUs it changed", self.folder, exc, self.action)

    def _write_locked(self, data: bytes) -> None:
        # As lakefs.write_file_atomically, but the flock is taken on the temporary file before its
        # rename, so that no other agent can settle the entry of one alive between the two.
        lakefs.makedirs_durably(self.folder)
        check_private_folder(self.folder)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.prefix}", suffix=".tmp", dir=self.folder)
        path = self.folder / f"{self.prefix}{secrets.token_hex(8)}.json"
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.fchmod(fd, 0o600)
            os.write(fd, data)
            os.fsync(fd)
            os.replace(tmp, path)
            lakefs.fsync_dir(self.folder)
        except BaseException:
            os.close(fd)
            Path(tmp).unlink(missing_ok=True)
            raise
        self._fd, self._path = fd, path

    def _settle(self, nvml: Any, handles: Mapping[str, Any]) -> None:
        if self.lake is None:
            return  # no lake to write the owed rows into: they wait for a start that audits
        for path in sorted(self.folder.glob(f"{self.prefix}*.json")):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            except OSError:
                continue  # settled meanwhile, or not a file the agent wrote: the read below says so
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue  # its agent is alive and audits it itself
            try:
                entry = json.loads(read_state_text(path, owned=True))
                owed = _owed_outcomes(nvml, handles, entry, self.at)
                written = _audited_already(self.lake, entry)
                owed = [o for o in owed if o.gpu_uuid not in written]
                audit(self.lake, ApplyResult(entry["host"], entry["config_sha256"], False, owed),
                      parse_utc(entry["began_at"]))
                path.unlink()
                lakefs.fsync_dir(self.folder)
            except (OSError, ReplayStateError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("audit journal entry %s cannot be settled (%s: %s); left for the next start",
                            path, type(exc).__name__, exc)
            finally:
                os.close(fd)


def _owed_outcomes(nvml: Any, handles: Mapping[str, Any], entry: Mapping[str, Any],
                   now: dt.datetime) -> list[GpuOutcome]:
    """The rows a killed agent owed: one per GPU of `entry` whose limit reads as the one it set."""
    owed = []
    why = (f"by an agent stopped before its audit (killed, out of memory or a power cut); audited by the next "
           f"start at {format_utc(now)}")
    for uuid, gpu in entry["gpus"].items():
        before_mw, set_mw, lock = int(gpu["limit_mw_before"]), int(gpu["limit_mw_set"]), gpu["locked_sm_clocks_mhz"]
        try:
            now_mw = nvml.nvmlDeviceGetPowerManagementLimit(handles[uuid])
        except KeyError:
            log.warning("GPU %s, which a %s stopped before its audit was setting to %.1f W, is not on this host: "
                        "whether it was set is not known", uuid, entry["action"], set_mw / 1000)
            continue
        except nvml.NVMLError as exc:
            log.warning("GPU %s, which a %s stopped before its audit was setting to %.1f W, cannot be read (%s): "
                        "whether it was set is not known", uuid, entry["action"], set_mw / 1000,
                        nvml_error_text(nvml, exc))
            continue
        if now_mw != set_mw:
            continue  # never set (or set since by someone else): no row claims a change the agent did not make
        watts = dict(power_limit_w_before=before_mw / 1000, power_limit_w_requested=set_mw / 1000,
                     power_limit_w_after=now_mw / 1000)
        if entry["action"] == "rollback":
            owed.append(GpuOutcome(uuid, "rollback", f"back to the device default {set_mw / 1000:.1f} W {why}", **watts))
        else:
            clocks = "" if lock is None else (f", SM clocks locked to {lock[0]}-{lock[1]} MHz unless it was stopped "
                                              "before that set (NVML cannot read a lock back)")
            owed.append(GpuOutcome(uuid, "apply", f"set {set_mw / 1000:.1f} W{clocks} {why}", **watts))
    return owed


def _audited_already(lake: str | Path, entry: Mapping[str, Any]) -> set[str]:
    """The GPUs of `entry` whose row its agent wrote before it was stopped."""
    table = read_host_audit(lake, entry["host"], ["audited_at", "gpu_uuid", "action"])
    if table is None:
        return set()
    began_at = parse_utc(entry["began_at"])
    return {r["gpu_uuid"] for r in table.to_pylist()
            if r["audited_at"] == began_at and r["gpu_uuid"] in entry["gpus"]}

