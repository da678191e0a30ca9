"""What `joulehouse sql`'s process does around a query, where DuckDB's own limits do not reach:
a cap on its memory, Ctrl-C and SIGTERM as a stop, and a hard deadline.

The command is one process for one query, so it may end itself: these belong to the command,
not to `warehouse.sqlrun`, whose connections a notebook or a test also holds.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager


DATA_HEADROOM_BYTES = 512 * 2**20


def _data_bytes() -> int | None:
    """This process's data (VmData: private writable memory, committed or not), None off Linux."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            line = next(line for line in status if line.startswith("VmData:"))
    except (OSError, StopIteration):
        return None
    return int(line.split()[1]) * 1024


@contextmanager
def data_capped(memory_limit: str) -> Iterator[None]:
    """The query's process may hold at most twice `memory_limit` of data more than it holds now,
    plus DATA_HEADROOM_BYTES: DuckDB's memory_limit counts its buffers, not every allocation, and
    `SELECT repeat('x', 3000000000)` took 6 GB of the host under a 1 GB limit. Past the cap an
    allocation fails, which DuckDB reports as out of memory. The old limit is restored after."""
    import resource

    from joulehouse.warehouse.settings import size_bytes

    held = _data_bytes()
    if held is None:
        yield
        return
    old_soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = held + int(2 * size_bytes(memory_limit)) + DATA_HEADROOM_BYTES
    for limit in (old_soft, hard):
        if limit != resource.RLIM_INFINITY:
            cap = min(cap, limit)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (old_soft, hard))


class Stopped:
    """Whether Ctrl-C, SIGTERM or SIGHUP arrived while the query ran."""

    by_signal = False


@contextmanager
def signals_stop_the_query() -> Iterator[Stopped]:
    """Ctrl-C, SIGTERM and SIGHUP stop the query (DuckDB polls Python's signals), so the connection closes
    and its private spill folder is deleted: a plain kill left one behind each time. DuckDB reports
    a signal handler's exception as RuntimeError('Query interrupted'), so the caller reads
    `by_signal` to tell that from a query's own error."""
    import signal

    stopped = Stopped()

    def interrupt(signum, frame):
        stopped.by_signal = True
        raise KeyboardInterrupt

    try:
        # SIGHUP too: a closed terminal or a dropped ssh session left up to 4 GB of spill in /tmp
        previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    except ValueError:  # not the main thread (an embedding runner): leave the signals alone
        yield stopped
        return
    try:
        yield stopped
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


# How long past its time limit a query may go on after DuckDB was told to stop. The interrupt lands
# within a second wherever DuckDB polls for it; its binder and optimizer never poll, and 23
# chained CTEs (each reading the one before twice) ran 17 s and took 2.6 GB under a 1 s limit.
HARD_STOP_GRACE_S = 3.0
HARD_STOP_EXIT_CODE = 2


@contextmanager
def hard_deadline(timeout_s: float, message: str, spill_dir: str | None = None,
                  grace_s: float = HARD_STOP_GRACE_S) -> Iterator[None]:
    """End the process with `message` (one line on stderr, exit code 2) if the block is still
    running `grace_s` after `timeout_s`: the query's own interrupt did not reach it. Its spill
    folder is deleted first, as the connection's finalizer would have (os._exit runs none). The
    block's work happens in DuckDB with the GIL released, so this thread runs while it does."""
    done = threading.Event()

    def watch() -> None:
        if done.wait(timeout_s + grace_s):
            return
        try:
            sys.stdout.flush()  # what was printed before the stall stays printed
        except (OSError, ValueError):
            pass
        if spill_dir:
            shutil.rmtree(spill_dir, ignore_errors=True)
        os.write(2, f"error: {message}\n".encode())
        os._exit(HARD_STOP_EXIT_CODE)

    watcher = threading.Thread(target=watch, name="jh-sql-deadline", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()
