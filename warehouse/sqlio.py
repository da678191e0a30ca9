"""The one way library code reaches the warehouse.

Every layer keeps its SQL in a folder of its own, one statement or relation per `.sql` file, and
reads it through `SqlFiles` (the text is loaded once per process). Statements run with bound
parameters (`$day`), never with values pasted into the text; identifiers, which cannot be bound,
come from the code's own allow-lists and pass through `quoted_relation`. Rows come back as
records (`records`). Optional relations are probed with `relation_exists`. A daily step writes
its day with `replace_day` (from a query) or `replace_day_rows` (from rows or a frame): delete the
day, insert the new rows, in one transaction, so re-running a day replaces exactly that day and a
failure leaves the previous rows. `transaction` nests: inside a caller's transaction (a build that
replaces several relations together) it joins that one instead of opening its own.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

import duckdb

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_FRAME_VIEW = "_jh_day_rows"
_PARSER: duckdb.DuckDBPyConnection | None = None  # parses only; never reads a file or a table
_OPEN_TRANSACTIONS: dict[int, int] = {}  # id(connection) -> depth of `transaction` blocks open on it


class SqlFiles:
    """The `.sql` files of one folder of a package: `SqlFiles("joulehouse.models", "sql")`."""

    def __init__(self, package: str, folder: str = "sql") -> None:
        self.package, self.folder = package, folder
        self._texts: dict[str, str] = {}

    @cached_property
    def path(self) -> Path:
        return Path(str(resources.files(self.package) / self.folder))

    def names(self) -> list[str]:
        return sorted(p.stem for p in self.path.glob("*.sql"))

    def text(self, name: str) -> str:
        """The text of `<folder>/<name>.sql`; FileNotFoundError names the file and the choices."""
        if name not in self._texts:
            path = self.path / f"{name}.sql"
            if not path.is_file():
                raise FileNotFoundError(f"no SQL file {path} (expected one of {self.names()})")
            self._texts[name] = path.read_text(encoding="utf-8")
        return self._texts[name]

    def body(self, name: str) -> str:
        """The text without its final `;`, to embed as a subquery (INSERT ... BY NAME <body>)."""
        return self.text(name).rstrip().rstrip(";")

    def execute(self, con: duckdb.DuckDBPyConnection, name: str,
                params: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
        """Run the file's statement with `params` bound by name; returns the cursor."""
        text = self.text(name)
        return con.execute(text, dict(params)) if params else con.execute(text)

    def records(self, con: duckdb.DuckDBPyConnection, name: str,
                params: Mapping[str, Any] | None = None) -> list[dict]:
        return records(self.execute(con, name, params))

    def temp_view(self, con: duckdb.DuckDBPyConnection, view: str, name: str) -> None:
        """(Re)create the temp view `view` as the file's query (views take no parameters: a file
        that needs values reads them with getvariable)."""
        create_temp_view(con, view, self.body(name))

    def temp_table(self, con: duckdb.DuckDBPyConnection, table: str, name: str,
                   params: Mapping[str, Any] | None = None) -> None:
        """(Re)create the temp table `table` from the file's query, `params` bound."""
        create_temp_table(con, table, self.body(name), params)

    def insert_into(self, con: duckdb.DuckDBPyConnection, table: str, name: str,
                    params: Mapping[str, Any] | None = None) -> None:
        """INSERT INTO `table` BY NAME the rows of the file's query, `params` bound."""
        con.execute(f"INSERT INTO {quoted_relation(table)} BY NAME {self.body(name)}", dict(params or {}))

    def empty_table(self, con: duckdb.DuckDBPyConnection, table: str, name: str,
                    params: Mapping[str, Any] | None = None) -> None:
        """Create the table `table` with the columns of the file's query, empty, if it does not exist."""
        con.execute(f"CREATE TABLE IF NOT EXISTS {quoted_relation(table)} AS SELECT * FROM ({self.body(name)}) "
                    "WHERE false", dict(params or {}))


def used_parameters(sql: str) -> list[str]:
    """The named parameters (`$name`) the statements of `sql` use, lower-cased and sorted. Read by
    DuckDB's own parser, so a `$x` inside a string literal or a comment is none, and `$Day` and
    `$day` are one parameter, as DuckDB binds them (names match case-insensitively)."""
    global _PARSER
    if _PARSER is None:
        _PARSER = duckdb.connect(":memory:")
    names = {name.lower() for statement in _PARSER.extract_statements(sql) for name in statement.named_parameters}
    return sorted(names)


def records(cursor: duckdb.DuckDBPyConnection) -> list[dict]:
    """The cursor's rows as dicts keyed by column name."""
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def quoted_relation(name: str) -> str:
    """`name` as a quoted SQL identifier (schema.table allowed); identifiers cannot be bound."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"relation name {name!r} is not a plain identifier (letters, digits, _; optional schema.)")
    return ".".join(f'"{part}"' for part in name.split("."))


def string_literal(text: str) -> str:
    """`text` as a SQL string literal, for the few places a value cannot be bound: a view's text
    (a view takes no parameters) and a COPY's target path."""
    if "\x00" in text:
        raise ValueError(f"path {text!r} holds a NUL byte")
    return "'" + text.replace("'", "''") + "'"


def relation_exists(con: duckdb.DuckDBPyConnection, name: str, *, temporary: bool | None = None) -> bool:
    """True when a table or view called `name` (optionally `schema.name`) exists; `temporary`
    True or False keeps only temporary or only persistent ones."""
    schema, _, table = name.rpartition(".")
    rows = con.execute(
        "SELECT 1 FROM duckdb_tables() WHERE table_name = $t AND ($s = '' OR schema_name = $s) "
        "AND ($temp IS NULL OR temporary = $temp) "
        "UNION ALL SELECT 1 FROM duckdb_views() WHERE view_name = $t AND ($s = '' OR schema_name = $s) "
        "AND ($temp IS NULL OR temporary = $temp)",
        {"t": table, "s": schema, "temp": temporary},
    ).fetchall()
    return bool(rows)


def columns_of(con: duckdb.DuckDBPyConnection, name: str) -> list[str]:
    """The column names of the relation `name`, in order."""
    return [row[0] for row in con.execute(f"DESCRIBE {quoted_relation(name)}").fetchall()]


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """BEGIN ... COMMIT, ROLLBACK on any error; inside an enclosing `transaction` on the same
    connection, part of that one (the outermost commits or rolls back everything). DuckDB cannot be
    asked whether a transaction is open (a BEGIN that fails aborts it), so this one keeps count."""
    key = id(con)
    if _OPEN_TRANSACTIONS.get(key):
        _OPEN_TRANSACTIONS[key] += 1
        try:
            yield
        finally:
            _OPEN_TRANSACTIONS[key] -= 1
        return
    con.execute("BEGIN TRANSACTION")
    _OPEN_TRANSACTIONS[key] = 1
    try:
        yield
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    finally:
        del _OPEN_TRANSACTIONS[key]


def replace_day(con: duckdb.DuckDBPyConnection, table: str, day: dt.date, query: str,
                params: Mapping[str, Any] | None = None, *, append: bool = False) -> int:
    """Replace `day`'s rows of `table` with the rows of `query` (its `day` column must be `day`);
    the table is created from the query on first use. `append`: keep rows already written for the
    day (a build that writes a day in batches). Returns the day's rows in the table."""
    quoted, body = quoted_relation(table), query.rstrip().rstrip(";")
    bound = dict(params or {})
    with transaction(con):
        if relation_exists(con, table, temporary=False):
            if not append:
                con.execute(f"DELETE FROM {quoted} WHERE day = ?", [day])
            con.execute(f"INSERT INTO {quoted} BY NAME {body}", bound)
        else:
            con.execute(f"CREATE TABLE {quoted} AS {body}", bound)
        # fetchall, not fetchone: a result left unfinished blocks register/unregister on this connection
        return con.execute(f"SELECT count(*) FROM {quoted} WHERE day = ?", [day]).fetchall()[0][0]


Rows = tuple[Sequence[str], Sequence[Sequence[Any]]]


def replace_day_rows(con: duckdb.DuckDBPyConnection, day: dt.date, tables: Mapping[str, Rows | Sequence[Mapping[str, Any]] | Any],
                     *, where: Mapping[str, Any] | None = None) -> None:
    """For each `table -> rows`: delete the table's rows of `day`, insert `rows`; all tables change
    together or none does. The tables exist already. `rows` is `(columns, value rows)`, a list of
    dicts (a key some lack is NULL there), or an Arrow/polars frame (inserted by column name).
    `where` {column: value}: delete only the day's rows with those values (two writers of one
    table, each replacing its own rows of the day)."""
    filters = "".join(f" AND {quoted_relation(column)} = ?" for column in (where or {}))
    with transaction(con):
        for table, rows in tables.items():
            quoted = quoted_relation(table)
            con.execute(f"DELETE FROM {quoted} WHERE day = ?{filters}", [day, *(where or {}).values()])
            _insert(con, quoted, rows)


def _insert(con: duckdb.DuckDBPyConnection, quoted: str, rows: Any) -> None:
    if isinstance(rows, tuple) and len(rows) == 2:
        columns, values = rows
    elif isinstance(rows, list):
        if not rows:
            return
        columns = list(dict.fromkeys(k for r in rows for k in r))  # a key some rows lack is NULL there
        values = [[r.get(c) for c in columns] for r in rows]
    else:  # a frame: one INSERT by column name
        frame = rows.to_arrow() if hasattr(rows, "to_arrow") else rows
        if frame.num_rows:
            con.register(_FRAME_VIEW, frame)
            try:
                con.execute(f"INSERT INTO {quoted} BY NAME SELECT * FROM {_FRAME_VIEW}")
            finally:
                con.unregister(_FRAME_VIEW)
        return
    if values:
        names = ", ".join(f'"{c}"' for c in columns)
        marks = ", ".join("?" for _ in columns)
        con.executemany(f"INSERT INTO {quoted} ({names}) VALUES ({marks})", [list(r) for r in values])


def create_temp_view(con: duckdb.DuckDBPyConnection, view: str, query: str) -> None:
    """(Re)create the temp view `view` as `query` (a temp table of that name is dropped first)."""
    _drop_other_kind(con, view, "TABLE")
    con.execute(f"CREATE OR REPLACE TEMP VIEW {quoted_relation(view)} AS {query.rstrip().rstrip(';')}")


def create_temp_table(con: duckdb.DuckDBPyConnection, table: str, query: str,
                      params: Mapping[str, Any] | None = None) -> None:
    """(Re)create the temp table `table` from `query` with `params` bound (a temp view of that
    name is dropped first)."""
    _drop_other_kind(con, table, "VIEW")
    body = query.rstrip().rstrip(";")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {quoted_relation(table)} AS {body}", dict(params or {}))


def alias_view(con: duckdb.DuckDBPyConnection, view: str, relation: str) -> None:
    """The temp view `view` over every column of `relation` (an identifier, which cannot be bound):
    a file's SQL reads the fixed name whatever relation a caller passes."""
    create_temp_view(con, view, f"SELECT * FROM {quoted_relation(relation)}")


def set_variables(con: duckdb.DuckDBPyConnection, values: Mapping[str, Any]) -> None:
    """SET VARIABLE name = value for each: how a view's SQL reads values (views take no parameters)."""
    for name, value in values.items():
        if not _IDENTIFIER.match(name) or "." in name:
            raise ValueError(f"variable name {name!r} is not a plain identifier")
        con.execute(f"SET VARIABLE {name} = ?", [value])


def insert_rows(con: duckdb.DuckDBPyConnection, table: str, rows: Rows | Sequence[Mapping[str, Any]] | Any) -> None:
    """Insert `rows` (as replace_day_rows takes them) into the existing `table`."""
    _insert(con, quoted_relation(table), rows)


def _drop_other_kind(con: duckdb.DuckDBPyConnection, name: str, kind: str) -> None:
    catalog = "duckdb_tables() WHERE table_name" if kind == "TABLE" else "duckdb_views() WHERE view_name"
    if con.execute(f"SELECT 1 FROM {catalog} = $n AND temporary", {"n": name}).fetchall():
        con.execute(f"DROP {kind} {quoted_relation(name)}")


def ensure_columns(con: duckdb.DuckDBPyConnection, table: str, columns: Mapping[str, str]) -> None:
    """Add the `columns` (name -> DuckDB type, from the code's own lists) that `table` lacks: tables
    stored before a column was added keep working."""
    quoted = quoted_relation(table)
    for name, kind in columns.items():
        if not _IDENTIFIER.match(name) or not re.fullmatch(r"[A-Z]+", kind):
            raise ValueError(f"column {name!r} of type {kind!r} is not a plain identifier and type")
        con.execute(f"ALTER TABLE {quoted} ADD COLUMN IF NOT EXISTS {name} {kind}")
