"""The `joulehouse` command: node commands and analytics commands behind one Typer app.

Heavy imports (duckdb, polars, Airflow, plotly...) happen inside each command, so that a node
installed with `pip install .[node]` can run `joulehouse collect` and `joulehouse agent`.
"""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
