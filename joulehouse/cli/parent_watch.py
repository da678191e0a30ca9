"""The Airflow child of `joulehouse run` stops when its parent is gone.

A `kill -9` of `joulehouse run` left its child building the day on its own: nobody reading its
output (so no log), and the run lock released with the parent, so a second run of the same day
started beside it. The child now watches its parent (the parent's pid, in the environment) and
leaves at once when it has gone: as after a crash, the warehouse keeps its last published file,
and the next run rebuilds the day. It also holds the parent's run lock (an inherited descriptor of
the same flock), so no second run starts before it has gone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import IO, Any

PARENT_PID_VARIABLE = "JOULEHOUSE_RUN_PARENT_PID"
POLL_S = 1.0


def stop_when_parent_dies(poll_s: float = POLL_S) -> threading.Thread | None:
    """Start a daemon thread that ends this process (exit code 3) once the process named by
    JOULEHOUSE_RUN_PARENT_PID is no longer its parent; None when the variable is not set."""
    wanted = os.environ.get(PARENT_PID_VARIABLE, "")
    if not wanted.isdigit():
        return None
    parent = int(wanted)

    def watch() -> None:
        stopped = threading.Event()
        while not stopped.wait(poll_s):
            if os.getppid() != parent:  # re-parented: the parent has died
                try:  # to the parent's pipe, most likely closed with it: then nobody hears it
                    print(f"joulehouse run (pid {parent}) is gone: its Airflow child stops here; "
                          "run the day again", file=sys.stderr, flush=True)
                except (OSError, ValueError):
                    pass
                os._exit(3)

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


def spawn_holding_lock(argv: list[str], env: dict[str, str], lock: IO[str], lock_line: str,
                       **popen: Any) -> subprocess.Popen:
    """Start `argv` as a child that holds the flock of the open file `lock` (it inherits the
    descriptor) and stops when this process dies (JOULEHOUSE_RUN_PARENT_PID); `lock_line` (with
    `{child}` for the child's pid) replaces the lock file's text, which a refused run prints."""
    child = subprocess.Popen(argv, env={**env, PARENT_PID_VARIABLE: str(os.getpid())},
                             pass_fds=(lock.fileno(),), **popen)
    lock.seek(0)
    lock.truncate()
    lock.write(lock_line.format(child=child.pid) + "\n")
    lock.flush()
    return child
