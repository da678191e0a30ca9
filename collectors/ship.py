"""Ship finished lake files from a node to the central lake, exactly once per file.

The central lake is a folder or any fsspec URL (`s3://bucket/lake`, `file:///srv/lake`,
`memory://lake` in tests); files keep their relative layout
(`<dataset>/date=.../host=.../part-*.parquet`). Only finished files are shipped: `*.parquet`
names that do not start with "." (the writer's temporary files are `.<name>.parquet.tmp`), so
the spool (`*.arrows`) and files still being written are never sent.

Exactly once, resumable. For each file, in this order:
1. copy it to the destination, hashing it (sha256) on the way;
   - where the destination can rename (a folder, SFTP, HDFS, memory): to a fixed temporary
     name beside the final one, whose size is then checked, then renamed onto the final name;
   - on an object store a single PUT is atomic: straight to the final key, size checked after;
2. append `{dest, path, bytes, sha256, mtime_ns, shipped_at}` to the local manifest (one JSON
   line, flushed and fsynced).
A crash before step 2 leaves the file unrecorded: the next run copies it again onto the same
name (a reader sees the old whole file or the new whole file, never a second copy). A crash
after step 2 leaves it recorded: the next run skips it. A torn last manifest line (a crash in
the middle of the append) is ignored, so that file is sent again, unless the central lake's
compaction has merged it meanwhile: its partition's ledger (`_compacted.jsonl`) lists the same
name, size and sha256, and the file is recorded, not sent beside the rows that already hold it.
Nothing is duplicated,
nothing is missed. A lake file that changed after it was shipped (a range the DCGM source
redid after a crash) is shipped again over its old copy, and the log says so. A re-imported
log's file, replaced or removed on the node, is replaced or removed at the destination, its
rows taken out of the files the destination's compaction merged them into (ship_withdraw).

One ship runs at a time per manifest (an exclusive lock beside it).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from joulehouse.collectors import lakefs, ship_withdraw
from joulehouse.collectors.ship_manifest import Manifest, ManifestEntry, ShipError

log = logging.getLogger(__name__)

CHUNK_BYTES = 8 * 1024 * 1024
# Object stores: no rename (a "move" is copy + delete), but one PUT is all or nothing.
OBJECT_STORE_PROTOCOLS = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss", "oci", "r2"})
TMP_SUFFIX = ".ship.tmp"
# systemd's EnvironmentFile keeps a `# comment` written after a value as part of it, and the unit
# passes `--to ${JOULEHOUSE_SHIP_TO}` whole: `/srv/lake   # the NFS mount` shipped into a new folder
# of that name. A '#' between blanks names such a comment.
COMMENT_IN_VALUE = re.compile(r"\s#(\s|$)")


@dataclass
class ShipReport:
    """What one run did. `shipped`: files copied this run; `skipped`: already in the manifest."""

    shipped: list[ManifestEntry] = field(default_factory=list)
    skipped: int = 0
    reshipped_changed: int = 0
    # not in the manifest (a torn last line), but the destination's compaction ledger lists the
    # same bytes as merged: recorded as shipped, not sent
    already_compacted: int = 0
    # files a re-import removed on the node, removed at the destination (ship_withdraw)
    withdrawn: int = 0

    @property
    def bytes_shipped(self) -> int:
        return sum(e.bytes for e in self.shipped)


def finished_files(lake: str | Path) -> list[Path]:
    """The lake's finished files, sorted: `*.parquet` not hidden (temporary names start with
    '.') and not inside a hidden folder."""
    root = Path(lake)
    found = []
    for path in root.rglob("*.parquet"):
        rel = path.relative_to(root)
        if any(part.startswith(".") for part in rel.parts) or not path.is_file():
            continue
        found.append(path)
    return sorted(found)


def open_destination(dest: str) -> tuple[Any, str]:
    """(fsspec filesystem, root path) for a folder or an fsspec URL."""
    import fsspec

    if COMMENT_IN_VALUE.search(dest) and not Path(dest).is_dir():
        raise ShipError(f"--to {dest!r}: holds a comment (' # ...'); systemd's EnvironmentFile keeps text after "
                        "a value on its line, so write the comment on a line of its own above "
                        "JOULEHOUSE_SHIP_TO (a folder so named is taken once it exists)")
    try:
        fs, root = fsspec.core.url_to_fs(dest)
    except (ValueError, ImportError) as exc:
        raise ShipError(f"--to {dest!r}: cannot open this destination ({exc}); expected a folder or an "
                        "fsspec URL whose filesystem is installed (s3:// needs s3fs)") from None
    return fs, root.rstrip("/") or "/"


def _protocols(fs: Any) -> set[str]:
    protocol = fs.protocol
    return set(protocol) if isinstance(protocol, (tuple, list)) else {protocol}


def _is_local(fs: Any) -> bool:
    return bool(_protocols(fs) & {"file", "local"})


class Shipper:
    """Copies one lake's finished files to one destination (see the module docstring).

    `fs`/`root` default to what the URL names; `rename` defaults to True except on object
    stores. `after_file` is called after each file is recorded (progress bars use it)."""

    def __init__(self, lake: str | Path, dest: str, manifest_path: str | Path, *, fs: Any = None,
                 root: str | None = None, rename: bool | None = None):
        self.lake = Path(lake)
        self.manifest = Manifest(manifest_path)
        if fs is None:
            fs, root = open_destination(dest)
        self.fs = fs
        self.root = (root if root is not None else "").rstrip("/")
        # The manifest's key for this destination: "lake" and "/abs/lake" are the same folder.
        self.dest = f"file://{self.root}" if _is_local(fs) else dest
        self.rename = (not (_protocols(fs) & OBJECT_STORE_PROTOCOLS)) if rename is None else rename

    def pending(self) -> tuple[list[Path], dict[str, ManifestEntry]]:
        """Lake files not yet shipped (or changed since), and the manifest as loaded."""
        if not self.lake.is_dir():
            raise ShipError(f"--lake {self.lake}: no such folder; expected the node's local lake")
        if _is_local(self.fs):
            # shipped onto itself the lake would only record every file as shipped; inside it, the
            # lake would hold a second copy of every reading
            lake, dest = self.lake.resolve(), Path(self.root or "/").resolve()
            if dest == lake or lake in dest.parents:
                raise ShipError(f"--to {dest}: the node's lake {lake} itself, or a folder inside it; "
                                "give the central lake")
        shipped = self.manifest.load(self.dest)
        todo = []
        for path in finished_files(self.lake):
            entry = shipped.get(path.relative_to(self.lake).as_posix())
            if entry is None or entry.withdrawn:
                todo.append(path)
                continue
            stat = path.stat()
            if stat.st_size != entry.bytes or stat.st_mtime_ns != entry.mtime_ns:
                todo.append(path)
        return todo, shipped

    def run(self, after_file: Callable[[ManifestEntry], None] | None = None) -> ShipReport:
        """Ship every pending file; returns what was done. Raises ShipError on the first file
        that cannot be copied (the files before it stay shipped and recorded)."""
        report = ShipReport()
        with self.manifest.locked():
            todo, shipped = self.pending()
            report.skipped = len(finished_files(self.lake)) - len(todo)
            ledgers: dict[str, dict[str, dict]] = {}
            for path in todo:
                rel = path.relative_to(self.lake).as_posix()
                previous = shipped.get(rel)
                if previous is None and self._compacted_at_destination(path, rel, ledgers):
                    digest, read = _sha256(path)
                    self.manifest.append(_entry(self.dest, rel, read, digest))
                    report.already_compacted += 1
                    continue
                if previous is not None and not previous.withdrawn:
                    digest, read = _sha256(path)
                    if digest == previous.sha256:  # touched, not changed: record the new mtime only
                        self.manifest.append(_entry(self.dest, rel, read, digest))
                        report.skipped += 1
                        continue
                    log.warning("ship: %s changed since it was shipped (sha256 %s -> %s); shipping it again "
                                "over its old copy", rel, previous.sha256[:12], digest[:12])
                    report.reshipped_changed += 1
                # a file shipped before (changed, written again after a withdrawal, or sent under a
                # manifest line a crash cut, which the partition's ledger then names) may have its
                # earlier rows merged into another file by the destination's compaction; a file
                # without an import's log id is copied plainly either way
                parent, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
                merged_before = name in ledgers.get(parent, {})
                entry = self._replace(path, rel) if previous is not None or merged_before else self.ship_file(path, rel)
                self.manifest.append(entry)
                report.shipped.append(entry)
                if after_file is not None:
                    after_file(entry)
            # after the new files: a reader may see a moved log's rows twice for a moment, never none
            for withdrawal in ship_withdraw.pending_withdrawals(self.lake, shipped):
                self._withdraw(withdrawal)
                self.manifest.append(ManifestEntry(self.dest, withdrawal.path, 0, "", 0, _now(), withdrawn=True))
                report.withdrawn += 1
        return report

    def _partition(self, rel: str) -> Path | None:
        """The destination's partition folder of `rel` where it is a folder (compacted there)."""
        return Path(f"{self.root}/{rel}").parent if _is_local(self.fs) else None

    def _replace(self, path: Path, rel: str) -> ManifestEntry:
        """Ship `path` over its earlier version, and its log's earlier rows out of the files the
        destination's compaction merged them into (ship_withdraw)."""
        return self._at_destination(rel, lambda: ship_withdraw.replace_file(
            self._partition(rel), path, lambda: self.ship_file(path, rel)))

    def _withdraw(self, withdrawal: ship_withdraw.Withdrawal) -> None:
        log.info("ship: %s was withdrawn by a re-import on the node; removing it at %s", withdrawal.path, self.dest)
        self._at_destination(withdrawal.path, lambda: ship_withdraw.withdraw_file(
            self.fs, self.root, self._partition(withdrawal.path), withdrawal))

    def _at_destination(self, rel: str, step: Callable[[], Any]) -> Any:
        try:
            return step()
        except ShipError:
            raise
        except Exception as exc:  # noqa: BLE001 - OSError, a file there that does not open, the backend's own
            # nothing is recorded for `rel`: the next run does the whole step again
            raise ShipError(f"ship {rel} to {self.dest}: {_one_line(exc)} (not recorded; the next run "
                            "tries again)") from exc

    def _compacted_at_destination(self, path: Path, rel: str, ledgers: dict[str, dict[str, dict]]) -> bool:
        """Whether the destination's compaction already merged this very file (same name, size
        and sha256 in its partition's ledger): sending it again would put its rows there twice."""
        parent, name = rel.rsplit("/", 1) if "/" in rel else ("", rel)
        if parent not in ledgers:
            ledgers[parent] = self._read_ledger(f"{self.root}/{parent}/{lakefs.COMPACTED_LEDGER_NAME}")
        entry = ledgers[parent].get(name)
        if entry is None or entry.get("bytes") != path.stat().st_size or not entry.get("sha256"):
            return False
        if _sha256(path)[0] != entry["sha256"]:
            return False
        log.info("ship: %s was merged by the destination's compaction into %s; recorded, not sent again",
                 rel, entry.get("into"))
        return True

    def _read_ledger(self, ledger: str) -> dict[str, dict]:
        try:
            with self.fs.open(ledger, "r") as fh:
                text = fh.read()
        except FileNotFoundError:
            return {}
        except Exception as exc:  # noqa: BLE001 - OSError, or the backend's own (botocore, aiohttp...)
            raise ShipError(f"ship to {self.dest}: cannot read the destination's compaction ledger {ledger}: "
                            f"{_one_line(exc)}; expected a destination this node can reach, read and write "
                            "(its credentials and endpoint)") from exc
        return lakefs.parse_compaction_ledger(text)

    def ship_file(self, path: Path, rel: str) -> ManifestEntry:
        """Copy one file to `<root>/<rel>` (atomically, see the module docstring); check its size."""
        final = f"{self.root}/{rel}"
        parent = final.rsplit("/", 1)[0]
        try:
            if _is_local(self.fs):
                # The new date=/host= folders' names survive a power cut, or the file in them is lost
                # while the manifest says it was shipped.
                lakefs.makedirs_durably(parent)
            else:
                self.fs.makedirs(parent, exist_ok=True)
            if self.rename:
                # A fixed temporary name: a rerun after a crash overwrites it instead of leaving more.
                tmp = f"{parent}/.{final.rsplit('/', 1)[1]}{TMP_SUFFIX}"
                digest, read = self._copy(path, tmp)
                self._check_size(tmp, read.st_size, rel)
                self.fs.mv(tmp, final)
                if _is_local(self.fs):
                    lakefs.fsync_dir(parent)
            else:
                digest, read = self._copy(path, final)
                self._check_size(final, read.st_size, rel)
        except ShipError:
            raise
        except Exception as exc:  # noqa: BLE001 - OSError, or the backend's own (botocore, aiohttp...)
            # An object store's SDK raises its own errors (no credentials, endpoint unreachable), not
            # OSError: every one means this file was not sent, and it is not recorded, so the next run
            # sends it again.
            raise ShipError(f"ship {rel} to {self.dest}: {_one_line(exc)}") from exc
        return _entry(self.dest, rel, read, digest)

    def _copy(self, src: Path, target: str) -> tuple[str, os.stat_result]:
        """Stream `src` to `target`, fsynced where the destination is local; returns its sha256 and
        the stat of the file it read (not of whatever the path names after the copy: a source that
        replaced the file meanwhile must not have its new version recorded as shipped)."""
        digest = hashlib.sha256()
        with open(src, "rb") as fin, self.fs.open(target, "wb") as fout:
            read = os.fstat(fin.fileno())
            while chunk := fin.read(CHUNK_BYTES):
                digest.update(chunk)
                fout.write(chunk)
            if _is_local(self.fs):
                fout.flush()
                os.fsync(fout.fileno())
        return digest.hexdigest(), read

    def _check_size(self, target: str, expected: int, rel: str) -> None:
        got = self.fs.size(target)
        if got != expected:
            try:
                self.fs.rm(target)
            except Exception as exc:  # noqa: BLE001 - the ShipError below must win; the next run overwrites it
                log.warning("ship: could not remove the short copy %s: %s", target, _one_line(exc))
            raise ShipError(f"ship {rel}: {target} holds {got} bytes after the copy; expected {expected} "
                            "(the copy was removed and is retried next run)")


def _one_line(exc: BaseException) -> str:
    """`Type: message` on one line (botocore's and aiohttp's messages can span several)."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def _sha256(path: Path) -> tuple[str, os.stat_result]:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        read = os.fstat(fh.fileno())
        while chunk := fh.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest(), read


def _entry(dest: str, rel: str, stat: os.stat_result, digest: str) -> ManifestEntry:
    return ManifestEntry(dest=dest, path=rel, bytes=stat.st_size, sha256=digest, mtime_ns=stat.st_mtime_ns,
                         shipped_at=_now())


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def ship_lake(lake: str | Path, dest: str, manifest_path: str | Path, **kwargs: Any) -> ShipReport:
    """Ship `lake`'s finished files to `dest` once each; `manifest_path` records what was sent."""
    return Shipper(lake, dest, manifest_path, **kwargs).run()


__all__ = ["Manifest", "ManifestEntry", "ShipError", "ShipReport", "Shipper", "finished_files",
           "open_destination", "ship_lake"]
