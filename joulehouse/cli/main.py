"""joulehouse: the energy warehouse of a GPU fleet.

Node commands (collect, agent, ingest, simulate) and analytics commands (run, demo, sql,
carbon, tco, caps) behind one command. Heavy imports (duckdb, polars, Airflow, plotly) happen
inside each command, so a node installed with `pip install .[node]` runs the node commands.
"""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__, pretty_exceptions_enable=False)

# Each module adds its commands with register(app); the order is the order of `--help`.
COMMAND_MODULES = ["demo", "sql", "sim", "ingest", "collect", "ship", "compact", "agent", "caps", "jobs", "carbon", "tco",
                   "settings"]

for _name in COMMAND_MODULES:
    importlib.import_module(f"joulehouse.cli.{_name}").register(app)
