"""Read-only SQL for people: ad hoc queries, saved queries by name, and relation descriptions.

The database is opened read-only, so a statement that writes fails (ReadOnlyQueryError says so).
Results are fetched in batches (`fetchmany`), never all at once, so a query over the whole lake
prints without holding its result in memory. Parameters are bound (`$day` in the SQL, given as
`day=2026-01-02`), never pasted into the text.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from joulehouse.warehouse.catalog import LAYER_TITLES, public_by_layer, relation, saved_queries
from joulehouse.warehouse.db import connect
from joulehouse.warehouse.sqlio import used_parameters

BATCH_ROWS = 2048


class QueryError(ValueError):
    """A query, its parameters or a saved-query name is wrong; the message says what to pass."""


class ReadOnlyQueryError(QueryError):
    """The query tried to change the warehouse, which `joulehouse sql` opens read-only."""


@dataclass
class QueryResult:
    """Column names and an iterator over batches of row tuples."""

    columns: list[str]
    batches: Iterator[list[tuple]]


def open_read_only(db_path: str | Path) -> duckdb.DuckDBPyConnection:
    """Open the warehouse read-only; raw_* views read the lake path stored at the last build."""
    return connect(db_path, None, read_only=True)


def run_query(con: duckdb.DuckDBPyConnection, sql: str, params: Mapping[str, str] | None = None,
              batch_rows: int = BATCH_ROWS) -> QueryResult:
    """Execute `sql` with named parameters `params`; results come back in batches."""
    params = dict(params or {})
    used = used_parameters(sql)
    missing = [p for p in used if p not in params]
    if missing:
        raise QueryError(f"the query uses {', '.join('$' + p for p in missing)}; pass "
                         + " ".join(f"--param {p}=VALUE" for p in missing))
    unused = [p for p in params if p not in used]
    if unused:
        raise QueryError(f"--param {', '.join(unused)} not used by the query (it uses: {', '.join(used) or 'none'})")
    try:
        cursor = con.execute(sql, {p: params[p] for p in used}) if used else con.execute(sql)
    except duckdb.Error as exc:
        message = str(exc)
        if "read-only" in message or "read only" in message:
            raise ReadOnlyQueryError(
                "the warehouse is opened read-only: this statement would change it; "
                "joulehouse sql runs queries (SELECT, DESCRIBE, ...) only"
            ) from None
        raise QueryError(f"query failed: {message}") from None
    columns = [d[0] for d in cursor.description] if cursor.description else []

    def batches() -> Iterator[list[tuple]]:
        while rows := cursor.fetchmany(batch_rows):
            yield rows

    return QueryResult(columns=columns, batches=batches())


def saved_query_sql(name: str) -> str:
    """The SQL text of the saved query `name` (warehouse/queries/<name>.sql)."""
    queries = saved_queries()
    if name not in queries:
        raise QueryError(f"no saved query {name!r}; known: {', '.join(queries)}")
    return queries[name].read_text()


def describe(name: str | None = None, extra_dirs: Iterable[str | Path] = ()) -> str:
    """A plain-text description: every public relation (name, kind, grain) grouped by layer, or one
    relation's columns with their units. `extra_dirs`: the SQL folders of later layers (models,
    reports) whose described relations are listed too (see warehouse.catalog)."""
    if name is None:
        lines = ["Public relations (joulehouse sql --describe NAME for columns):"]
        for layer, rs in public_by_layer(extra_dirs).items():
            lines.append(f"{LAYER_TITLES.get(layer, layer)}")
            lines.extend(f"  {r.name:<32} {r.kind:<8} {r.grain}" for r in rs)
        lines.append("Saved queries (joulehouse sql --saved NAME):")
        for q, path in saved_queries().items():
            first = path.read_text().splitlines()[0].removeprefix("--").strip()
            lines.append(f"  {q:<32} {first}")
        return "\n".join(lines)
    try:
        r = relation(name, extra_dirs)
    except KeyError as exc:
        raise QueryError(str(exc.args[0])) from None
    lines = [f"{r.name} ({r.kind}, {r.source}): {r.summary}", f"grain: {r.grain}"]
    if r.notes:
        lines.append(r.notes)
    for c in r.columns:
        lines.append(f"  {c.name:<24} [{c.unit}] {c.meaning}")
    return "\n".join(lines)
