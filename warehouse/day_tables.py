"""Replace one day's rows of warehouse tables in one transaction: the way every daily step
writes, so a re-run of a day replaces exactly that day and a failure leaves the old rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb


def replace_day_rows(con: duckdb.DuckDBPyConnection, day: dt.date,
                     tables: Mapping[str, tuple[Sequence[str], Sequence[Sequence[Any]]]]) -> None:
    """For each `table -> (columns, rows)`: delete the table's rows of `day`, insert `rows`
    (nothing to insert is fine). All tables change together or none does. Table and column names
    come from the caller's code, never from input; values are bound."""
    con.execute("BEGIN TRANSACTION")
    try:
        for table, (columns, rows) in tables.items():
            con.execute(f'DELETE FROM "{table}" WHERE day = ?', [day])
            if rows:
                names = ", ".join(f'"{c}"' for c in columns)
                marks = ", ".join("?" for _ in columns)
                con.executemany(f'INSERT INTO "{table}" ({names}) VALUES ({marks})', [list(r) for r in rows])
        con.execute("COMMIT")
    except Exception:
        con.execute("ROLLBACK")
        raise
