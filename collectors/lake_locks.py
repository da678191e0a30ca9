"""One collector per source and lake: a second `joulehouse collect` of the same source into the
same lake, with a spool folder of its own (systemd's [collector] spool_dir beside a hand-started
run with the default), passed the spool's lock and wrote every reading twice, at other instants,
so the warehouse's duplicate rule could not see it (review, helper-88: 40 rows per GPU for 20).

Each source's lock is an exclusive flock on `<lake>/.collect-locks/<source>.lock`, held while the
collector runs and released by the kernel however the process ends. Collectors of other sources
(NVML in one, DCGM in another) may share a lake: their rows are other streams, which the
warehouse tells apart.
"""

from __future__ import annotations

import fcntl
import logging
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_DIR = ".collect-locks"  # hidden: no reader of the lake lists it (ship, the warehouse, compaction)


class SourceInUseError(RuntimeError):
    """Another collector writes this source into this lake; the message names both."""


@contextmanager
def source_locks(lake: Path, sources: Iterable[str]) -> Iterator[None]:
    """Hold `<lake>/.collect-locks/<source>.lock` for each of `sources` while the block runs;
    SourceInUseError, holding none, when another process holds one."""
    folder = Path(lake) / LOCK_DIR
    held: list[int] = []
    try:
        for source in sorted(set(sources)):
            try:
                folder.mkdir(parents=True, exist_ok=True)  # a lock need not outlive a power cut: no fsync
                fd = os.open(folder / f"{source}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
            except OSError as exc:
                # a full disk at the first start: the collector holds its rows in memory rather than
                # die (collect.py); the spool's own lock still keeps one collector per spool
                log.warning("lake %s: cannot make the lock of source %s (%s); not checking for a second "
                            "collector of it", lake, source, exc.strerror or exc)
                continue
            held.append(fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise SourceInUseError(
                    f"another collector writes source {source!r} into the lake {lake} (lock "
                    f"{folder / (source + '.lock')}): its readings would be stored twice; run one collector per "
                    "source and lake") from None
        yield
    finally:
        for fd in held:
            os.close(fd)
