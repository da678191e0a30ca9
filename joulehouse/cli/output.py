"""How commands print records: a table for people on a terminal, JSON or CSV for programs.

`--format` picks; without it a terminal gets the table and a pipe gets JSON, so
`joulehouse caps from-sweep FILE | jq` works without a flag. Numbers are rounded for people
(`rounded`): six significant digits, never float noise like 2.0966400000000003.
"""

from __future__ import annotations

import csv
import json
import math
import sys
from collections.abc import Sequence
from enum import Enum
from typing import Any

import typer


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


FORMAT_HELP = "table | json | csv (default: a table on a terminal, JSON when piped)."
# Piped (into a file or `less`), a rich table keeps its natural width instead of being squeezed to
# 80 columns: no value is folded or cut short in a file a user keeps.
PIPED_WIDTH = 10_000


def stdout_console():
    """A rich Console on stdout: the terminal's width there, PIPED_WIDTH when piped."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=PIPED_WIDTH)


def rounded(value: Any, digits: int = 6) -> Any:
    """A float to `digits` significant digits (ints, None and text unchanged)."""
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.{digits}g}")
    return value


# Column-name suffix -> the unit a table header shows; longest first (_per_kwh before _kwh).
UNITS = (("_gco2e_per_kwh", "gCO2e/kWh"), ("_usd_per_mwh", "USD/MWh"), ("_per_kj", "per kJ"), ("_tco2e", "tCO2e"),
         ("_kwh", "kWh"), ("_usd", "USD"), ("_mhz", "MHz"), ("_pct", "%"), ("_ratio", "ratio"), ("_j", "J"),
         ("_w", "W"), ("_s", "s"))


def header(key: str) -> str:
    """A column name as a header a person reads: power_limit_w -> 'power limit (W)'."""
    for suffix, unit in UNITS:
        if key.endswith(suffix) and len(key) > len(suffix):
            return f"{key[: -len(suffix)].replace('_', ' ')} ({unit})"
    return key.replace("_", " ")


def _cell(value: Any) -> str:
    """A table cell for people: four significant digits, thousands separated, '-' for NULL."""
    from rich.markup import escape

    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and math.isfinite(value):
        value = rounded(value, 4)
        return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:g}"
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def rounded_deep(value: Any) -> Any:
    """`rounded` through dicts and lists (a JSON document's every float)."""
    if isinstance(value, dict):
        return {k: rounded_deep(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [rounded_deep(v) for v in value]
    return rounded(value)


def resolve(fmt: OutputFormat | None) -> OutputFormat:
    if fmt is not None:
        return fmt
    return OutputFormat.table if sys.stdout.isatty() else OutputFormat.json


def emit(records: Sequence[dict], fmt: OutputFormat | None, *, single: bool = False, title: str | None = None,
         columns: Sequence[str] | None = None) -> None:
    """Print `records`; `single`: JSON gets the one object rather than a list. `columns`: the
    table's columns (default: every key); JSON and CSV carry every key."""
    fmt = resolve(fmt)
    records = [{k: rounded(v) for k, v in r.items()} for r in records]
    if fmt is OutputFormat.json:
        typer.echo(json.dumps(records[0] if single and len(records) == 1 else records, indent=2))
    elif fmt is OutputFormat.csv:
        keys = list(dict.fromkeys(k for r in records for k in r))
        writer = csv.DictWriter(sys.stdout, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        keys = list(columns or dict.fromkeys(k for r in records for k in r))
        table = Table(title=escape(title) if title else None, header_style="bold")
        for k in keys:  # a narrow terminal wraps a cell rather than cutting it
            table.add_column(header(k), overflow="fold",
                             justify="right" if any(isinstance(r.get(k), (int, float)) for r in records) else "left")
        for r in records:  # cells are data, never rich markup: "[recommend]" stays as written
            table.add_row(*(_cell(r.get(k)) for k in keys))
        Console().print(table)


def emit_summary(result: dict, fmt: OutputFormat | None, *, title: str, rows: Sequence[tuple[str, str, str]]) -> None:
    """One result (an estimate): on a terminal a table of `rows` (key, words, unit) and its method
    below; JSON the whole document; CSV one row of its plain values."""
    fmt = resolve(fmt)
    result = rounded_deep(result)
    if fmt is OutputFormat.json:
        typer.echo(json.dumps(result, indent=2, default=str))
    elif fmt is OutputFormat.csv:
        plain = {k: v for k, v in result.items() if not isinstance(v, (dict, list))}
        writer = csv.DictWriter(sys.stdout, fieldnames=list(plain), lineterminator="\n")
        writer.writeheader()
        writer.writerow(plain)
    else:
        from rich.console import Console
        from rich.markup import escape
        from rich.table import Table

        table = Table(title=escape(title), header_style="bold")
        table.add_column("what")
        table.add_column("value", justify="right")
        table.add_column("unit")
        for key, words, unit in rows:
            if key in result:
                table.add_row(escape(words), _cell(result[key]), escape(unit))
        console = Console()
        console.print(table)
        if "method" in result:
            console.print(f"method: {escape(str(result['method']))}", style="dim")
