"""How every command refuses bad input: one line on stderr, `error: ...` (or `refused: ...`), exit code 2
(or the command's own)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import NoReturn

import typer


def fail(message: str, code: int = 2, label: str = "error") -> NoReturn:
    """Print `label: message` on one line to stderr (whatever the cause's text holds) and exit
    with `code`."""
    typer.echo(f"{label}: {' '.join(message.split())}", err=True)
    raise typer.Exit(code)


def parse_duration(value: str, option: str) -> float:
    """A duration as every command spells it ('1s', '500ms', '5m', '1h'; a bare number is seconds)
    -> seconds, or fail naming the option."""
    from joulehouse.collectors.collect import parse_duration_s

    try:
        return parse_duration_s(value, option)
    except ValueError as exc:
        fail(str(exc))


def parse_day(value: str, option: str) -> dt.date:
    """A UTC day given as YYYY-MM-DD, or fail naming the option."""
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        fail(f"{option} {value!r} is not a date (YYYY-MM-DD)")


def node_lake(value: str, option: str = "--lake") -> Path:
    """A node's own lake: a local folder (its spool, rename and fsync are local). A URL is refused
    in one line: Typer's Path would quietly have made `s3://b/lake` the local folder `s3:/b/lake`."""
    if "://" in value:
        fail(f"{option} {value}: a node's lake is a local folder; `joulehouse ship --to {value}` sends it there")
    return Path(value)

