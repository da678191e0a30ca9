"""Input files a command is given (logs, sweeps, keys, settings, price and grid files): the one
check every reader makes before it reads, and reads whose memory is bounded however hostile the file.

A path that is not a regular file is refused before it is opened: /dev/zero or /dev/urandom never
ends (a reader would fill the memory), and a FIFO blocks the open until someone writes to it. The
open itself does not block and is checked again on what it opened (`open_regular`): a FIFO swapped
in between the check and the open would otherwise hold the reader for good.
A regular file is read line by line with a bound on each line, so a log of any length streams,
while a file without newlines (a binary, a log cut into one line) is refused at the bound, in one
line naming the file and the line, rather than read whole. Small documents (a key, a tariff) are
read whole up to a byte bound. A reader that parses the file itself (a CSV) reads it in `reading`,
where an OSError or the parser's own error becomes the reader's one line naming the file.

Each reader passes its own error class (`error`): the message becomes that class's one-line error,
which its command already reports.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator


class InputFileError(ValueError):
    """An input file is missing, not a regular file, or past a size bound (the message says which)."""


def regular_file(path: str | Path, what: str, error: type[Exception] = InputFileError,
                 max_bytes: int | None = None) -> Path:
    """`path` when it is a regular file (a link to one counts) of at most `max_bytes`, else raise
    `error` naming `what` (e.g. "nvidia-smi log"), the path and what was expected."""
    path = Path(path)
    try:
        mode_size = os.stat(path)
    except FileNotFoundError:
        raise error(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode_size.st_mode):
        raise error(f"{what} {path} is a folder; expected a file")
    if not stat.S_ISREG(mode_size.st_mode):
        raise error(f"{what} {path} is not a regular file (a device, pipe or socket); expected a file")
    if max_bytes is not None and mode_size.st_size > max_bytes:
        raise error(f"{what} {path} is {_size_text(mode_size.st_size)}; expected at most {_size_text(max_bytes)}")
    return path


def open_regular(path: str | Path, what: str, error: type[Exception] = InputFileError, *,
                 missing_raises: bool = False) -> int:
    """A blocking descriptor of `path` opened read-only, refused unread (`error`) unless what was
    opened is a regular file. Opened without blocking: a FIFO put at the path after `regular_file`
    looked would block a plain open until someone writes to it, and a terminal would become the
    process's own. A missing file is `error` too (removed since it was checked), or, with
    `missing_raises`, FileNotFoundError for a caller to whom absence is an answer."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        if missing_raises:
            raise
        raise error(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise error(f"cannot open {what} {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise error(f"{what} {path} is not a regular file (replaced while it was opened); refused unread")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def reading(path: Path, what: str, error: type[Exception] = InputFileError, *,
            parse_errors: tuple[type[Exception], ...] = (), expected: str = "", **text: str) -> Iterator[IO]:
    """`path` (which `regular_file` passed) opened as `open_regular` opens it, binary (text given
    open's `encoding`, `errors` or `newline`), for a block that reads it: an OSError meanwhile, or
    one of the parser's `parse_errors` (the file is not `expected`), becomes `error`, one line
    naming the file."""
    try:
        with open(open_regular(path, what, error), "r" if text else "rb", **text) as fh:
            yield fh
    except error:
        raise
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    except parse_errors as exc:
        raise error(f"{what} {path} is not {expected}: {' '.join(str(exc).split())[:200]}") from None


def read_bytes_at_most(path: str | Path, what: str, max_bytes: int, error: type[Exception] = InputFileError) -> bytes:
    """A small document's bytes (a key, a JSON tariff): a regular file of at most `max_bytes`,
    never more than that read even if the file grows meanwhile."""
    path = regular_file(path, what, error, max_bytes)
    with reading(path, what, error) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise error(f"{what} {path} is more than {_size_text(max_bytes)}; expected at most that")
    return data


@contextmanager
def text_lines(path: str | Path, what: str, max_line_chars: int, error: type[Exception] = InputFileError,
               encoding: str = "utf-8", errors: str = "strict") -> Iterator[Iterator[str]]:
    """The lines of a regular text file (newlines kept, as a file yields them; csv.reader takes
    them), each at most `max_line_chars`: a longer one raises `error` naming the file and the line."""
    path = regular_file(path, what, error)
    try:
        fh = open(open_regular(path, what, error), encoding=encoding, errors=errors, newline="")
    except OSError as exc:
        raise error(f"cannot open {what} {path}: {exc.strerror or exc}") from None
    with fh:
        yield _bounded_lines(fh, path, what, max_line_chars, error)


def _bounded_lines(fh: IO[str], path: Path, what: str, max_line_chars: int,
                   error: type[Exception]) -> Iterator[str]:
    number = 0
    while True:
        # room for the bound and a \r\n: a longer read is a longer line, never a split newline
        line = fh.readline(max_line_chars + 2)
        if not line:
            return
        number += 1
        if len(line.rstrip("\r\n")) > max_line_chars:
            raise error(f"{what} {path}: line {number} is longer than {max_line_chars} characters; "
                        f"expected lines of at most {max_line_chars} (is it a text log?)")
        yield line


def _size_text(n_bytes: int) -> str:
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if n_bytes >= 1 << shift:
            return f"{n_bytes / (1 << shift):.{0 if n_bytes % (1 << shift) == 0 else 1}f} {unit}"
    return f"{n_bytes} bytes"
