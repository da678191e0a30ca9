"""joulehouse: the energy warehouse of a GPU fleet.

Example: joulehouse demo (then open var/demo/reports/<day>.html)

Node commands (collect, ship, agent, keys, ingest, simulate), analytics commands (run, demo, sql,
compact, carbon, tco, caps, jobs) and `settings` (every setting, explained) behind one command.
Heavy imports (duckdb, polars, Airflow, plotly) happen inside each command, so a node installed
with `pip install .\\[node]` runs the node commands.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Optional

import typer
from typer.core import TyperArgument, TyperOption

# Paragraphs as single lines: rich rewraps them to the terminal, where hard breaks would stay.
HELP = "\n\n".join(" ".join(p.split()) for p in __doc__.split("\n\n"))
app = typer.Typer(no_args_is_help=True, add_completion=False, help=HELP, pretty_exceptions_enable=False)

# Help shows what to type, not Python's types: a flag shows nothing, a repeatable option its
# element once ("TEXT ..."), everything else Click's upper-case names (INTEGER, FLOAT, PATH, TEXT).
_TYPE_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "Path": "PATH"}


def _what_to_type(param, ctx) -> str | None:
    if param.metavar is not None and isinstance(param, TyperOption):
        return param.metavar  # an argument's metavar is its name, shown beside: the type column keeps the type
    if isinstance(param, TyperOption) and param.is_flag:
        return None
    word = param.display_type(ctx).strip("<>")
    repeated = word.startswith("list[")
    word = word.removeprefix("list[").removesuffix("]")
    word = _TYPE_WORDS.get(word, word.upper() if word.isidentifier() else word)
    return f"{word} ..." if repeated else word


TyperOption.display_type_rich = _what_to_type
TyperArgument.display_type_rich = _what_to_type


def _package_version() -> str:
    try:
        return version("joulehouse")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"joulehouse {_package_version()}")
        raise typer.Exit()


@app.callback()
def main(
    show_version: Annotated[Optional[bool], typer.Option("--version", is_eager=True, callback=_print_version,
                                                         help="Print the version and exit.")] = None,
) -> None:
    """joulehouse: the energy warehouse of a GPU fleet."""


# Each module adds its commands with register(app); the order is the order of `--help`.
COMMAND_MODULES = ["demo", "sql", "sim", "ingest", "collect", "ship", "compact", "agent", "caps", "jobs", "carbon", "tco",
                   "settings"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"joulehouse.cli.{_name}").register(app)
