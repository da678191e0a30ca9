"""How every command refuses bad input: one line on stderr, `error: ...` (or `refused: ...`), exit code 2
(or the command's own). The line is bounded and printable: a value it quotes is cut to about 80
characters (`quoted`), control characters and ANSI escapes are shown as escapes."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import NoReturn

import typer


# A value an error quotes is cut to this many characters, and a whole error line to MESSAGE_CHARS
# (the cause's text may quote input whole): a 100 kB --gpu-model came back whole on the terminal.
QUOTED_CHARS = 80
MESSAGE_CHARS = 1000


def quoted(value: str) -> str:
    """`value` as an error quotes it: its repr (newlines, ANSI escapes and other control characters
    written as escapes, not sent to the terminal), cut to about QUOTED_CHARS with its length said."""
    shown = repr(value)
    if len(shown) <= QUOTED_CHARS:
        return shown
    return f"{shown[:QUOTED_CHARS - 4]}...{shown[-1]} ({len(value):,} characters)"


def printable_line(text: str) -> str:
    """`text` as one line a terminal shows as written: each run of whitespace one space, any other
    control character (an ANSI escape) its Python escape, and the middle cut past MESSAGE_CHARS
    (the start names the option, the end says what was expected)."""
    line = "".join(c if c.isprintable() else repr(c)[1:-1] for c in " ".join(text.split()))
    if len(line) <= MESSAGE_CHARS:
        return line
    half = MESSAGE_CHARS // 2
    return f"{line[:half]} ... [{len(line) - 2 * half:,} characters cut] ... {line[-half:]}"


def fail(message: str, code: int = 2, label: str = "error") -> NoReturn:
    """Print `label: message` on one bounded, printable line to stderr (whatever the cause's text
    holds) and exit with `code`."""
    typer.echo(f"{label}: {printable_line(message)}", err=True)
    raise typer.Exit(code)


def refuse_empty(param: typer.CallbackParam, value: str | None) -> str | None:
    """An option's callback: an empty or blank value refused, naming the option. A command that
    reads `value or default` took '' as not given (`agent apply --host ''` took this machine's name)."""
    if value is not None and not value.strip():
        fail(f"{param.opts[0]} {quoted(value)}: expected a value, not an empty one (leave the option out for its default)")
    return value


# How each --config read through settings_file says its default: "default: built-in" and "none, the
# built-in defaults" hid that an exported JOULEHOUSE_CONFIG is read.
CONFIG_DEFAULT = "default: the file JOULEHOUSE_CONFIG names, else the built-in defaults"


def settings_file(config: str | Path | None) -> Path | None:
    """--config, else the file JOULEHOUSE_CONFIG names (what the daily DAG reads, and the README has
    the analytics host export), else None: the built-in defaults. Without it, `joulehouse run` wrote
    the defaults for the DAG and `joulehouse settings` showed values the DAG does not use."""
    if config is not None:
        return Path(config)
    named = os.environ.get("JOULEHOUSE_CONFIG", "").strip()
    return Path(named) if named else None


def config_origin(config: str | Path | None) -> str:
    """What to add to a settings file's error when the file came from JOULEHOUSE_CONFIG, not
    --config: the line named a file the user never typed, and not where it came from."""
    if config is None and os.environ.get("JOULEHOUSE_CONFIG", "").strip():
        return " (the file JOULEHOUSE_CONFIG names; --config overrides it)"
    return ""


def parse_duration(value: str, option: str) -> float:
    """A duration as every command spells it ('1s', '500ms', '5m', '1h'; a bare number is seconds)
    -> seconds, or fail naming the option."""
    from joulehouse.collectors.collect import parse_duration_s

    try:
        return parse_duration_s(value, option)
    except ValueError as exc:
        fail(str(exc))


# The days a reading can have: from the Unix epoch to a year before the calendar ends (a day,
# its neighbours and the runs the commands make from it; 9999-12-31 raised OverflowError mid-run).
DAY_RANGE = (dt.date(1970, 1, 1), dt.date(9998, 12, 31))


def parse_day(value: str, option: str) -> dt.date:
    """A UTC day given as YYYY-MM-DD within DAY_RANGE, or fail naming the option."""
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        fail(f"{option} {quoted(value)} is not a date (YYYY-MM-DD)")
    if not DAY_RANGE[0] <= day <= DAY_RANGE[1]:
        fail(f"{option} {value}: expected a day from {DAY_RANGE[0]} to {DAY_RANGE[1]}")
    return day


def node_lake(value: str, option: str = "--lake") -> Path:
    """A node's own lake: a local folder (its spool, rename and fsync are local). A URL is refused
    in one line: Typer's Path would quietly have made `s3://b/lake` the local folder `s3:/b/lake`."""
    if "://" in value:
        fail(f"{option} {value}: a node's lake is a local folder; `joulehouse ship --to {value}` sends it there")
    return Path(value)



def output_folder(path: Path, option: str, holds: str = "a folder") -> Path:
    """The folder a command writes into, created if need be and checked writable before any work
    starts, or fail in one line naming the option: a file where the folder should be, a folder
    that cannot be made (/proc/x, a file on the way), one that cannot be written (read-only)."""
    import tempfile

    if path.exists() and not path.is_dir():
        fail(f"{option} {path} is a file, not a folder: give {holds}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{option} {path}: cannot create the folder ({exc.strerror or exc}); give {holds}")
    try:  # a probe, not the command's first file: a folder that takes no file fails here, not mid-run
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        fail(f"{option} {path}: cannot write into the folder ({exc.strerror or exc}); give {holds}")
    return path


METRICS_PORT_HELP = "Serve Prometheus /metrics on this port (0: off), e.g. 9402."
METRICS_ADDRESS_HELP = "Address of the /metrics port: 127.0.0.1, or 0.0.0.0 for a Prometheus on another host."
METRICS_TEXTFILE_HELP = "Also write the metrics to this *.prom file for node_exporter's textfile collector."


def expose_metrics(metrics, port: int, address: str, textfile: Path | None):
    """Serve and/or write `metrics` (a prometheus_client collector of the command's own stats,
    collectors.metrics) on --metrics-port / --metrics-textfile; None when both are off. Fails
    naming the option that cannot be used (port taken or out of range, textfile not writable)."""
    if not port and not textfile:
        return None
    from prometheus_client import CollectorRegistry

    from joulehouse.collectors.metrics import MetricsExposure

    registry = CollectorRegistry()
    registry.register(metrics)

    if not 0 <= port <= 65535:
        fail(f"--metrics-port {port}: expected 0 (off) or a port 1..65535")
    try:
        return MetricsExposure(registry, port=port, address=address, textfile=textfile)
    except OSError as exc:
        where = f"--metrics-port {port} on {address}" if port else f"--metrics-textfile {textfile}"
        fail(f"{where}: {exc.strerror or exc}")
