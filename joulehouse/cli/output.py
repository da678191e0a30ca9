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


def rounded(value: Any, digits: int = 6) -> Any:
    """A float to `digits` significant digits (ints, None and text unchanged)."""
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.{digits}g}")
    return value


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
        table = Table(*keys, title=escape(title) if title else None, header_style="bold")
        for r in records:  # cells are data, never rich markup: "[recommend]" stays as written
            table.add_row(*("-" if r.get(k) is None else escape(str(r.get(k))) for k in keys))
        Console().print(table)
