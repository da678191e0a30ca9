"""Where the lake lives: a local folder or an fsspec URL (`s3://bucket/lake`, `gs://...`).

A local lake is a `Path`; an object-store lake is a URL string, joined with "/" (never through
`Path`, which would fold `s3://` into `s3:/`). The filesystem of a URL comes from fsspec with its
usual configuration: credentials and endpoint from the environment (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_ENDPOINT_URL` for an S3-compatible store such as MinIO or moto), or
fsspec's own config (`FSSPEC_S3_ENDPOINT_URL`...). The fsspec backend (s3fs, gcsfs...) is imported
only when a URL lake is used, so a node writing to a local folder never needs it.
"""

from __future__ import annotations

import json
import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any


# In a central lake's partition folder: one JSON line per file that compaction merged into
# another and removed ({"name", "bytes", "mtime_ns", "sha256", "first_at", "last_at", "into"}: its
# first and last reading, ISO 8601 UTC; null where no reading has a time, absent from lines written
# before they were kept; warehouse/lake_compact.py). Ship reads it, so a file sent again after its rows were compacted is
# not put back beside them; the gate, so a compaction after a day was built is not a change of what
# the build read, unless it merged in a file the build did not read whose readings reach that day.
COMPACTED_LEDGER_NAME = "_compacted.jsonl"


def parse_compaction_ledger(text: str) -> dict[str, dict]:
    """{file name: its entry} of a compaction ledger's text. A line a crash cut short, or one that
    is not a JSON object naming a file, is skipped: that file was not removed yet, and a reader
    takes nothing from it."""
    entries = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("name"), str):
            entries[entry["name"]] = entry
    return entries


def is_url(lake: str | Path) -> bool:
    """True when `lake` names an object store or other fsspec protocol (`proto://...`)."""
    return isinstance(lake, str) and "://" in lake and not lake.startswith("file://")


def lake_root(lake: str | Path) -> str | Path:
    """`lake` as a URL without a trailing "/", or as a local Path (`file://` stripped)."""
    if is_url(lake):
        return str(lake).rstrip("/")
    text = str(lake)
    return Path(text.removeprefix("file://"))


def join(lake: str | Path, *parts: str) -> str | Path:
    """`lake`/parts...: a URL string for an object-store lake, a Path for a local one."""
    root = lake_root(lake)
    if isinstance(root, Path):
        return root.joinpath(*parts)
    return posixpath.join(root, *parts)


def filesystem(lake: str | Path) -> Any:
    """The fsspec filesystem serving `lake` (a URL); raises naming the missing backend package."""
    import fsspec

    protocol = str(lake).split("://", 1)[0]
    try:
        return fsspec.filesystem(protocol)
    except ImportError as exc:
        raise ImportError(
            f"lake {lake}: the {protocol}:// filesystem needs its fsspec backend "
            f"(s3fs for s3://, gcsfs for gs://, adlfs for az://): {exc}"
        ) from exc


def makedirs_durably(folder: str | Path) -> None:
    """Create `folder` and any missing parents, fsyncing each new one's parent so that the new
    names survive a power cut (a file fsynced into a folder whose own entry was lost is lost too)."""
    folder = Path(folder)
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for new in reversed(missing):
        try:
            new.mkdir()
        except FileExistsError:
            pass  # another writer made it: its entry is that writer's to make durable, and harmless to repeat
        fsync_dir(new.parent)


def write_file_atomically(path: str | Path, data: bytes, mode: int) -> None:
    """`path` holds the whole of `data` (with `mode`) or what it held before, after a power cut too:
    a fresh file created exclusively beside it (mkstemp: never a fixed name another user could
    plant as a link for root to write through), fsynced, renamed over it, the folder fsynced."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(folder: str | Path) -> None:
    """Make a local folder's entries (new names, removals) durable: fsync the directory itself."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
