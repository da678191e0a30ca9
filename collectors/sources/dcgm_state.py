"""The DCGM source's watermark file: where the last range written ends, and the range being
written ("pending"), so that a restart resumes exactly there (collectors/sources/dcgm.py)."""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from joulehouse.collectors.sources.base import SourceError

STATE_VERSION = 1


class WatermarkState:
    """The JSON state file: `watermark_at` (last instant written, UTC) and `pending` (the range
    being written, redone first after a crash). Written atomically (temp file, fsync, rename).
    Lost, or older than the lake, it is put back from the lake's newest range (dcgm_resume)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.saved: dict[str, Any] | None = None  # what this process last wrote: a load that differs was changed under it

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {"state_version": STATE_VERSION, "watermark_at": None, "pending": None}
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise SourceError(f"dcgm state file {self.path} is not valid JSON ({exc}); "
                              "fix or remove it (the sync then goes on from the lake's newest range)") from None
        except OSError as exc:  # a folder, no permission, a failing disk: one line, not a traceback every poll
            raise SourceError(f"dcgm state file {self.path} cannot be read: {exc.strerror or exc}") from None
        if not isinstance(data, dict):
            raise SourceError(f"dcgm state file {self.path} holds a JSON {type(data).__name__}, not the state's object; "
                              "fix or remove it (the sync then goes on from the lake's newest range)")
        if data.get("state_version") != STATE_VERSION:
            raise SourceError(f"dcgm state file {self.path} has state_version "
                              f"{data.get('state_version')!r}; expected {STATE_VERSION}")
        # A hand-edited or damaged value raised ValueError/TypeError deep in the sync (a traceback
        # every poll); one without a UTC offset was read in the node's local time.
        pending = data.get("pending")
        instants = {"watermark_at": data.get("watermark_at")}
        if pending is not None:
            if not isinstance(pending, dict):
                raise SourceError(f"dcgm state file {self.path}: pending is {pending!r}, expected null or "
                                  "an object with start_at and end_at")
            instants.update({f"pending.{k}": pending.get(k) for k in ("start_at", "end_at")})
        for name, value in instants.items():
            if value is None and name == "watermark_at":
                continue
            if _aware_instant(value) is None:
                raise SourceError(f"dcgm state file {self.path}: {name} is {value!r}, expected an ISO 8601 "
                                  "time with its UTC offset; fix or remove the file (the sync then goes on from "
                                  "the lake's newest range)")
        return data

    def save(self, data: dict[str, Any]) -> None:
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w") as fh:
                json.dump(data, fh, indent=1, sort_keys=True)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
            self.saved = json.loads(json.dumps(data))
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)
        except OSError as exc:
            # a read-only or full disk: the range is kept pending and redone, and the poll says why in one line
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
            raise SourceError(f"dcgm state file {self.path} cannot be written: {exc.strerror or exc}") from None


def _aware_instant(value: object) -> datetime | None:
    """`value` as a timezone-aware datetime, or None when it is not an ISO 8601 text with an offset."""
    if not isinstance(value, str):
        return None
    try:
        instant = datetime.fromisoformat(value)
    except ValueError:
        return None
    return instant if instant.utcoffset() is not None else None


def iso_utc(ts: float) -> str:
    """Epoch seconds as UTC ISO 8601."""
    return datetime.fromtimestamp(ts, tz=timezone.utc).isoformat()


def epoch_s(iso: str) -> float:
    """ISO 8601 as epoch seconds."""
    return datetime.fromisoformat(iso).timestamp()
