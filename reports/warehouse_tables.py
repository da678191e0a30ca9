"""Defensive reads of warehouse relations: what exists, and one day's rows of it.

Reports and the export read relations other parts of the pipeline write. A site without IPMI, a
day whose fit failed, or an older database lacks some of them; these helpers let the caller say
so instead of failing. Relation and column names come from the caller's fixed lists and are
checked against information_schema before they are quoted into the query; the day is bound.
"""

from __future__ import annotations

import datetime as dt
from typing import Iterable

import polars as pl


def relation_columns(con, name: str) -> list[str]:
    """Columns of the table or view `name` in the current database, in order; [] if absent."""
    rows = con.execute(
        "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
        "AND table_schema = current_schema() ORDER BY ordinal_position",
        [name],
    ).fetchall()
    return [r[0] for r in rows]


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


UNKNOWN_GPU_MODEL = "GPU model not reported"


def read_day(
    con, name: str, day: dt.date | str, columns: Iterable[str] | None = None
) -> tuple[pl.DataFrame | None, str | None]:
    """One day's rows of relation `name` (rows whose `day` column equals `day`).

    Returns (frame, None) on success, or (None, why) when the relation or its `day` column is
    missing. Requested columns the relation lacks come back as NULL columns so callers can test
    for them with `frame[col].is_null().all()`; the relation's own columns are all kept."""
    present = relation_columns(con, name)
    if not present:
        return None, f"relation {name} does not exist"
    if "day" not in present:
        return None, f"relation {name} has no day column"
    day_value = dt.date.fromisoformat(str(day)) if not isinstance(day, dt.date) else day
    frame = con.sql(
        f"SELECT {', '.join(_quote(c) for c in present)} FROM {_quote(name)} WHERE day = ?", params=[day_value]
    ).pl()
    for col in columns or ():
        if col not in frame.columns:
            frame = frame.with_columns(pl.lit(None).alias(col))
    if "gpu_model" in frame.columns:
        # An imported log may not name its GPU; the figures still need a label for it.
        frame = frame.with_columns(pl.col("gpu_model").fill_null(UNKNOWN_GPU_MODEL))
    return frame, None


def count_day_by(con, name: str, day: dt.date | str, by: str) -> tuple[pl.DataFrame | None, str | None]:
    """Rows of relation `name` on `day`, counted per value of column `by` (column `rows`).
    Aggregated in the database: a quarantine can hold millions of rows."""
    present = relation_columns(con, name)
    if not present:
        return None, f"relation {name} does not exist"
    missing = [c for c in ("day", by) if c not in present]
    if missing:
        return None, f"relation {name} has no {', '.join(missing)} column"
    day_value = dt.date.fromisoformat(str(day)) if not isinstance(day, dt.date) else day
    frame = con.sql(
        f"SELECT {_quote(by)}, count(*) AS rows FROM {_quote(name)} WHERE day = ? GROUP BY 1 ORDER BY 2 DESC, 1",
        params=[day_value],
    ).pl()
    return frame, None
