"""Ship's record of what it sent: an append-only, fsynced JSON-lines manifest (one line per file
and destination) and its lock; collectors/ship.py says how a run uses it."""

from __future__ import annotations

import fcntl
import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("joulehouse.collectors.ship")  # ship's log, as before this module was split out


class ShipError(RuntimeError):
    """Shipping could not go on; the message names the file or destination and the cause."""


@dataclass(frozen=True)
class ManifestEntry:
    """One shipped file: its path relative to the lake, size in bytes, sha256 (hex), the local
    file's modification time (ns) and when it was shipped (UTC)."""

    dest: str
    path: str
    bytes: int
    sha256: str
    mtime_ns: int
    shipped_at: str
    # the node's re-import removed the file and ship removed it at the destination (ship_withdraw)
    withdrawn: bool = False


class Manifest:
    """The append-only JSON-lines record of shipped files (one line per file and destination)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self, dest: str) -> dict[str, ManifestEntry]:
        """The latest entry per relative path for `dest`. A line a crash cut short is ignored."""
        entries: dict[str, ManifestEntry] = {}
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return entries
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                entry = ManifestEntry(**json.loads(line))
            except (json.JSONDecodeError, TypeError) as exc:
                if number == len(lines):
                    log.warning("ship manifest %s: last line is torn (%s); its file is shipped again",
                                self.path, exc)
                    continue
                raise ShipError(f"ship manifest {self.path} line {number} is not a manifest entry ({exc}); "
                                "expected one JSON object per line") from None
            if entry.dest == dest:
                entries[entry.path] = entry
        return entries

    def append(self, entry: ManifestEntry) -> None:
        """Append one entry and make it durable before returning."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fields = {k: v for k, v in entry.__dict__.items() if k != "withdrawn" or v}  # shipped lines as before
        line = json.dumps(fields, sort_keys=True) + "\n"
        _drop_torn_tail(self.path)
        with open(self.path, "ab") as fh:
            fh.write(line.encode())
            fh.flush()
            os.fsync(fh.fileno())

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the manifest's lock file for one run; a second concurrent run fails fast."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.path.with_name(self.path.name + ".lock")
        with open(lock_path, "w") as fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ShipError(f"another ship holds {lock_path}; expected one ship at a time per manifest") from None
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _drop_torn_tail(path: Path) -> None:
    """Cut a last line that a crash left without its newline (its file was never recorded), so
    the next entry starts on a line of its own."""
    try:
        fh = open(path, "r+b")
    except FileNotFoundError:
        return
    with fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        fh.seek(0)
        keep = fh.read().rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
