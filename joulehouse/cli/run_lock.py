"""One `joulehouse run` at a time per Airflow home, and its Airflow child stops when it is gone.

`one_run_at_a_time` holds an flock on `<Airflow home>/joulehouse-run.lock` for the run; a second
run is refused in one line naming the first (DayBeingBuilt).

A `kill -9` of `joulehouse run` left its child building the day on its own: nobody reading its
output (so no log), and the run lock released with the parent, so a second run of the same day
started beside it. The child now watches its parent (the parent's pid, in the environment) and
leaves at once when it has gone: as after a crash, the warehouse keeps its last published file,
and the next run rebuilds the day. It also holds the parent's run lock (an inherited descriptor of
the same flock), so no second run starts before it has gone.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any


class DagRunFailed(RuntimeError):
    """The DagRun ended in a state other than success; the message names the failed tasks."""


class DayBeingBuilt(DagRunFailed):
    """Another `joulehouse run` holds this Airflow home; the message names its day and process."""


RUN_LOCK_NAME = "joulehouse-run.lock"


@contextmanager
def one_run_at_a_time(airflow_home: Path, day: dt.date | Sequence[dt.date]) -> Iterator[Any]:
    """Hold `airflow_home` for the run of `day` (or of several days, run one after the other), or
    raise DayBeingBuilt naming the run holding it. Yields the lock file: a child given its
    descriptor holds the lock too, for as long as it lives."""
    days = [day] if isinstance(day, dt.date) else list(day)
    try:
        airflow_home.mkdir(parents=True, exist_ok=True)
        fh = open(airflow_home / RUN_LOCK_NAME, "a+", encoding="utf-8")
    except OSError as exc:  # beside [warehouse] db_path: a folder that cannot be made (/proc/...), no permission
        raise DagRunFailed(f"cannot make the run's Airflow home {airflow_home} (beside [warehouse] db_path): "
                           f"{exc.strerror or exc}") from None
    with fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = dict(part.split("=", 1) for part in fh.read().split() if "=" in part)
            pid = holder.get("pid", "?")
            if "child" in holder and pid.isdigit() and not _process_exists(int(pid)):
                pid = f"{holder['child']}, the Airflow child of a run that was killed"  # it stops within a second
            # Short: `joulehouse run` prints it through rich, which wraps at the terminal's width.
            held = holder.get("day", "").split(",")
            if len(days) == 1 and days[0].isoformat() in held:
                raise DayBeingBuilt(f"{days[0]} is being built by another joulehouse run (pid {pid})") from None
            raise DayBeingBuilt(f"another joulehouse run (pid {pid}) is building {holder.get('day', 'a day')}") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid={os.getpid()} day={','.join(d.isoformat() for d in days)}\n")
        fh.flush()
        yield fh


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's: it exists
    return True


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
