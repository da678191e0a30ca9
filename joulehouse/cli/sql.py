"""`joulehouse sql`: read-only SQL against the warehouse, saved queries, and descriptions."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import sys
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Optional

import typer

from joulehouse.cli.options import CONFIG_DEFAULT, config_origin, printable_line, settings_file


RELATIONS_MD = Path(str(resources.files("joulehouse.warehouse") / "RELATIONS.md"))
REGENERATE_RELATIONS = "joulehouse sql --describe --markdown > warehouse/RELATIONS.md"


def public_sql_dirs() -> tuple[Path, ...]:
    """The SQL folders of the layers above the warehouse (models/sql, reports/sql), whose described
    relations are public too. Found here, at the top layer: the warehouse may not import them."""
    return tuple(Path(str(resources.files(pkg) / "sql")) for pkg in ("joulehouse.models", "joulehouse.reports.accounts"))


def relations_markdown() -> str:
    """warehouse/RELATIONS.md: every public relation and column of every layer, from the catalog."""
    from joulehouse.warehouse.catalog import describe_markdown

    preamble = (f"Generated from the SQL files' headers by `{REGENERATE_RELATIONS}`; do not edit by hand "
                "(edit the header of the relation's .sql file). Units are in brackets in the SQL headers "
                "and in the unit column here; times are UTC.")
    return describe_markdown(public_sql_dirs(), preamble=preamble)


class OutputFormat(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


def _parse_params(values: list[str]) -> dict[str, str]:
    """{name: value} of the --param options; a name is case-insensitive, as `$name` in DuckDB
    (`$Day` is `$day`), so one given twice, in whatever case, is refused rather than one of them
    silently winning."""
    from joulehouse.warehouse.sqlrun import QueryError

    params: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        name = name.strip().lower()
        if not sep or not name:
            raise QueryError(f"--param {item!r}: expected name=value, e.g. day=2026-01-02")
        if name in params:
            raise QueryError(f"--param {name} given twice (names are case-insensitive, as ${name} in the SQL)")
        params[name] = value
    return params


def _say_why_empty(con, sql: str, params: dict[str, str]) -> None:
    """A query over a day's readings that answered no row: say on stderr when the warehouse knows
    why (the day never built, its readings past retention), so no one reads "no idle energy"."""
    import datetime as dt

    from joulehouse.warehouse.readings import why_no_readings

    if "stg_gpu_samples" not in sql or "day" not in params:
        return
    try:
        day = dt.date.fromisoformat(params["day"])
    except ValueError:
        return
    reason = why_no_readings(con, day)
    if reason:
        typer.echo(f"note: no rows: {reason}", err=True)


def _json_value(value):
    """A value JSON can hold, through lists, structs and maps: a non-finite float as the string
    JSON parsers accept ("NaN", "Infinity", "-Infinity", as protobuf's JSON mapping writes them; a
    bare NaN is not JSON, and null would say missing), a map's non-text key (a date, as a
    `histogram()` gives) as its text; json.dumps' `default` only reached values, so such a result
    stopped the output half-written with a traceback."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {(k if isinstance(k, (str, int, bool)) or k is None else
                 _json_value(k) if isinstance(k, float) else str(k)): _json_value(v) for k, v in value.items()}
    return value


def _csv_value(value):
    """A list, struct or map as its JSON text (Python's repr, `{datetime.date(2026, 1, 2): 24}`, is
    no format a reader of CSV parses); anything else as csv writes it."""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(_json_value(value), default=str, allow_nan=False)
    return value


def unique_keys(columns: list[str]) -> list[str]:
    """JSON object keys for the columns: a name seen before gets "_2", "_3"... (a join's two
    `host` columns were one key, the first one's values silently lost)."""
    seen: set[str] = set()
    keys = []
    for name in columns:
        key, k = name, 1
        while key in seen:
            k += 1
            key = f"{name}_{k}"
        seen.add(key)
        keys.append(key)
    return keys


# A table is for reading: past this many rows it stops (5 M rows drew for five minutes, then the
# query's time limit ended it); csv and json stream every row.
TABLE_MAX_ROWS = 10_000
# ... and past this much text (values of 100 kB each drew for a minute); drawn this many cells at a time
TABLE_MAX_CHARS = 2_000_000
TABLE_CELLS_AT_ONCE = 5_000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _visible(value):
    """A text value with its control characters (ESC, BEL, C1...; not tab or newline) written as
    \\xNN, so a value from the lake can never drive the terminal it is printed on."""
    if not isinstance(value, str) or not _CONTROL.search(value):
        return value
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", value)


def _print(result, fmt: OutputFormat) -> int:
    """Write batches as they come; returns the number of rows."""
    out = sys.stdout
    n = 0
    if fmt is OutputFormat.csv:
        writer = csv.writer(out, lineterminator="\n")  # Unix line ends: what `cut`, `awk` and pandas expect
        # on a terminal a value's control characters are shown, not obeyed (an escape sequence in a
        # GPU name could retitle or clear the analyst's terminal); piped, the data goes out as it is
        shown = _visible if out.isatty() else (lambda v: v)
        writer.writerow([shown(c) for c in result.columns])
        for batch in result.batches:
            writer.writerows([[shown(_csv_value(v)) for v in row] for row in batch])
            n += len(batch)
    elif fmt is OutputFormat.json:
        keys = unique_keys(result.columns)
        out.write("[")
        for batch in result.batches:
            for row in batch:
                out.write(("," if n else "") + "\n" + json.dumps(dict(zip(keys, map(_json_value, row))),
                                                                 default=str, allow_nan=False))
                n += 1
        out.write("\n]\n")
    else:
        from rich.markup import escape
        from rich.table import Table

        from joulehouse.cli.output import stdout_console

        # Piped into a file or `less`, the table keeps its natural width instead of being squeezed
        # to 80 columns; on a terminal a long cell folds onto the next line. No value is ever cut
        # short ("0.57291213…"), and a value is data, never rich markup ("[bold]" stays as written).
        console = stdout_console()
        more, oversized, chars = False, False, 0
        for batch in result.batches:
            if n >= TABLE_MAX_ROWS:
                more = True  # the rest is not fetched: the query stops with the command
                break
            if len(batch) > TABLE_MAX_ROWS - n:
                batch, more = batch[:TABLE_MAX_ROWS - n], True
            # drawn a few thousand cells at a time, the query's time checked between: a batch of
            # 2,048 rows x 500 columns drew for 277 s past a 5 s limit
            step = max(1, TABLE_CELLS_AT_ONCE // max(1, len(result.columns)))
            for start in range(0, len(batch), step):
                result.check_time()
                cells = [["NULL" if v is None else escape(_visible(str(v))) for v in row]
                         for row in batch[start:start + step]]
                chars += sum(len(c) for row in cells for c in row)
                table = Table(show_header=(n == 0), header_style="bold")
                for column in result.columns:
                    table.add_column(escape(_visible(str(column))), overflow="fold")
                for row in cells:
                    table.add_row(*row)
                console.print(table)
                n += len(cells)
                if chars > TABLE_MAX_CHARS:  # a table is for reading: 200 MB of text is not
                    oversized = True
                    break
            if more or oversized:
                break
        if oversized:
            console.print(f"[dim]the first {n:,} rows: a table stops at {TABLE_MAX_CHARS:,} characters; --format csv "
                          "or json gives every row[/dim]")
        else:
            console.print(f"[dim]the first {n:,} rows; the result has more: --format csv or json gives every row, "
                          "a LIMIT or an aggregate fewer[/dim]" if more else f"[dim]{n} row(s)[/dim]")
    return n


# A query longer than the command line allows (about 128 KiB) comes on standard input; past this
# it is no query a person wrote, and reading it whole would hold any amount of memory.
MAX_STDIN_QUERY_BYTES = 1 << 20


def _stdin_query() -> str:
    """The query piped in (`joulehouse sql - < query.sql`), at most MAX_STDIN_QUERY_BYTES of UTF-8."""
    from joulehouse.warehouse.sqlrun import QueryError

    data = sys.stdin.buffer.read(MAX_STDIN_QUERY_BYTES + 1)
    if len(data) > MAX_STDIN_QUERY_BYTES:
        raise QueryError(f"the query on standard input is longer than {MAX_STDIN_QUERY_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise QueryError(f"the query on standard input is not UTF-8 text (byte {exc.start})") from None


def register(app: typer.Typer) -> None:
    """Add `sql` to the given app."""

    @app.command("sql")
    def sql_command(
        query: Optional[str] = typer.Argument(
            None, help="SQL to run ('-': read it from standard input), or with --describe a relation name."),
        db: Optional[Path] = typer.Option(None, "--db", help="Warehouse DuckDB file (default: the settings' \\[warehouse] db_path)."),
        output: OutputFormat = typer.Option(OutputFormat.table, "--format",
                                            help="Output format: table (its first 10,000 rows), csv or json (every row)."),
        param: list[str] = typer.Option([], "--param", help="Bound parameter name=value ($name in the SQL)."),
        describe: bool = typer.Option(False, "--describe", help="Describe relations (or the one named) instead."),
        markdown: bool = typer.Option(False, "--markdown", help="With --describe: every public relation as Markdown."),
        saved: Optional[str] = typer.Option(None, "--saved", help="Run a saved query by name (warehouse/queries)."),
        config: Optional[Path] = typer.Option(
            None, "--config", help="Settings file (TOML): the warehouse (\\[warehouse] db_path, unless --db) and a query's "
                                   "memory, spill and time limits (\\[warehouse] query_*); " + CONFIG_DEFAULT + "."),
    ) -> None:
        """Query the warehouse read-only: `joulehouse sql "SELECT ..." --db FILE`.

        Example: joulehouse sql --saved top-energy-gpus --param day=2026-06-11 --db var/demo/warehouse.duckdb
        """
        from joulehouse.settings import SettingsError, load_settings
        from joulehouse.warehouse.db import WarehouseError
        from joulehouse.cli.query_process import data_capped, hard_deadline, signals_stop_the_query
        from joulehouse.warehouse.sqlrun import (QueryError, describe as describe_text, open_read_only, run_query,
                                                 saved_query_sql, timeout_message)

        try:
            if markdown and not (describe and query is None):
                raise QueryError("--markdown goes with --describe and no relation name")
            if describe:
                typer.echo(relations_markdown() if markdown else describe_text(query, public_sql_dirs()), nl=not markdown)
                return
            if saved and query:
                raise QueryError("give either a QUERY or --saved NAME, not both")
            sql = saved_query_sql(saved) if saved else _stdin_query() if query == "-" else query
            if not sql or not sql.strip():
                raise QueryError("standard input held no query; pipe one in, or give a QUERY, --saved NAME or --describe"
                                 if query == "-" else "give a QUERY, --saved NAME or --describe")
            named = settings_file(config)
            if db is None and named is None:
                raise QueryError("give --db FILE, or --config (or JOULEHOUSE_CONFIG) naming the site's settings: "
                                 "their [warehouse] db_path is the warehouse")
            params = _parse_params(param)
            settings = load_settings(named).warehouse
            db = db if db is not None else Path(settings.db_path)  # the warehouse the site's DAG builds
            with signals_stop_the_query() as stopped:
                con = open_read_only(db, settings)
                (spill,) = con.execute("SELECT current_setting('temp_directory')").fetchone()
                try:
                    with data_capped(settings.query_memory_limit), \
                            hard_deadline(settings.query_timeout_s, timeout_message(settings.query_timeout_s), spill):
                        if _print(run_query(con, sql, params), output) == 0:
                            _say_why_empty(con, sql, params)
                except RuntimeError:
                    if stopped.by_signal:
                        raise KeyboardInterrupt from None
                    raise
                finally:
                    con.close()
                    # now, not when the connection is collected: an exit that ran no finalizer left it
                    shutil.rmtree(spill, ignore_errors=True)
        except SettingsError as exc:
            typer.echo(f"error: {exc}{config_origin(config)}", err=True)
            raise typer.Exit(2) from None
        except BrokenPipeError:
            raise  # a reader that stopped early (| head): handled where every command's is
        except OSError as exc:  # the output cannot be written (a full disk): a traceback before
            typer.echo(f"error: cannot write the result: {exc.strerror or exc}", err=True)
            raise typer.Exit(2) from None
        except (QueryError, WarehouseError) as exc:
            typer.echo(f"error: {printable_line(str(exc))}", err=True)
            raise typer.Exit(2) from None
        except MemoryError:
            typer.echo("error: the result needs more memory than [warehouse] query_memory_limit allows; "
                       "narrow the query or raise the setting", err=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            typer.echo("error: interrupted; the query was stopped", err=True)
            raise typer.Exit(130) from None
